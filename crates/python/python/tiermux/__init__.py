"""tiermux from Python: run experiments and replay block traces, with the
results as pandas DataFrames (the columns of the command's results.csv).

    import tiermux
    res = tiermux.run("experiments/orthus-fig4-caching-vs-splitting.toml")
    res.runs          # one row per run, as results.csv
    res.timeseries    # one row per sample, as timeseries.csv
    res.paper         # the papers' values beside ours, as paper.csv (or None)

An experiment is a file path or a dict with the file's structure
(``{"name": ..., "base": {...}, "sweep": [{...}], ...}``); see
docs/experiments.md. Errors raise :class:`TiermuxError` with the message
the ``tiermux`` command prints.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from typing import Optional, Sequence, Union

import pandas as pd

from . import _native
from ._native import TiermuxError

__all__ = ["Results", "TiermuxError", "run", "replay", "profiles", "policies"]


@dataclass
class Results:
    """The results of one experiment."""

    name: str
    description: str
    runs: pd.DataFrame
    timeseries: pd.DataFrame
    paper: Optional[pd.DataFrame]


def _frame(csv: str) -> pd.DataFrame:
    # pandas infers each column's type, as it would reading the file.
    return pd.read_csv(io.StringIO(csv))


def run(experiment: Union[str, os.PathLike, dict], threads: Optional[int] = None) -> Results:
    """Runs an experiment (a file path or a dict) and returns its results.

    Runs go in parallel on ``threads`` threads (default: all cores); the
    results are the same for any number of threads.
    """
    if isinstance(experiment, dict):
        text = _native.experiment_toml_from_json(json.dumps(experiment))
        source = str(experiment.get("name", "experiment"))
        out = _native.run_experiment(text=text, source=source, threads=threads)
    elif isinstance(experiment, (str, os.PathLike)):
        out = _native.run_experiment(path=os.fspath(experiment), threads=threads)
    else:
        raise TypeError(f"an experiment is a path or a dict, not {type(experiment).__name__}")
    paper = out["paper"]
    return Results(
        name=out["name"],
        description=out["description"],
        runs=_frame(out["runs"]),
        timeseries=_frame(out["timeseries"]),
        paper=None if paper is None else _frame(paper),
    )


def replay(
    trace: Union[str, os.PathLike],
    cache_pages: Union[int, Sequence[int]],
    policy: str = "lru",
    format: Optional[str] = None,
    page_size: Optional[int] = None,
    params: Optional[dict] = None,
) -> pd.DataFrame:
    """Hit ratios of a block trace at each cache size (pages), as
    ``tiermux replay`` computes them: pure ``lru`` or ``arc``, or any
    registered policy with its parameters over a cache and a home device.

    The format is taken from the file name unless given (``msr``,
    ``alibaba``, ``arc``, ``csv:SPEC``, ...).
    """
    sizes = [cache_pages] if isinstance(cache_pages, int) else list(cache_pages)
    csv = _native.replay(
        os.fspath(trace),
        sizes,
        policy=policy,
        format=format,
        page_size=page_size,
        params_json=None if params is None else json.dumps(params),
    )
    return _frame(csv)


def profiles() -> pd.DataFrame:
    """The built-in device profiles: name, description and source."""
    return _frame(_native.profiles())


def policies() -> pd.DataFrame:
    """The registered policies: name and summary."""
    return pd.DataFrame(_native.policies(), columns=["name", "summary"])
