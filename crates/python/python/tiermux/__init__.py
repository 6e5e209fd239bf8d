"""tiermux from Python: run experiments, replay block traces and read their
statistics (``trace_info``), with the
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

__all__ = ["Results", "TiermuxError", "run", "replay", "trace_info", "profiles", "policies"]


@dataclass
class Results:
    """The results of one experiment."""

    name: str
    description: str
    runs: pd.DataFrame
    timeseries: pd.DataFrame
    paper: Optional[pd.DataFrame]
    #: The same tables as CSV text, byte for byte what ``tiermux sim``
    #: writes (keys ``runs``, ``timeseries``, ``paper``).
    csv: dict


def _frame(csv: str) -> pd.DataFrame:
    # pandas infers each column's type, as it would reading the file.
    return pd.read_csv(io.StringIO(csv))


def _results(out: dict) -> Results:
    paper = out["paper"]
    return Results(
        name=out["name"],
        description=out["description"],
        runs=_frame(out["runs"]),
        timeseries=_frame(out["timeseries"]),
        paper=None if paper is None else _frame(paper),
        csv={k: out[k] for k in ("runs", "timeseries", "paper")},
    )


def _run_on_ray(text: str, source: str, address: str) -> dict:
    import ray  # only needed here

    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False)

    @ray.remote
    def one(text: str, source: str, index: int) -> bytes:
        from tiermux import _native as native

        return native.run_one(text, source, index)

    n = _native.run_count(text, source)
    blobs = ray.get([one.remote(text, source, i) for i in range(n)])
    return _native.assemble(text, source, blobs)


def run(
    experiment: Union[str, os.PathLike, dict],
    threads: Optional[int] = None,
    ray_address: Optional[str] = None,
) -> Results:
    """Runs an experiment (a file path or a dict) and returns its results.

    Runs go in parallel on ``threads`` threads (default: all cores), or,
    with ``ray_address`` (``"auto"`` or ``HOST:PORT``), as one Ray task
    each on that cluster, whose nodes have this package installed. The
    results are the same, byte for byte, either way.
    """
    if isinstance(experiment, dict):
        text = _native.experiment_toml_from_json(json.dumps(experiment))
        source = str(experiment.get("name", "experiment"))
    elif isinstance(experiment, (str, os.PathLike)):
        source = os.fspath(experiment)
        text = _native.read_experiment(source)
    else:
        raise TypeError(f"an experiment is a path or a dict, not {type(experiment).__name__}")
    if ray_address is not None:
        return _results(_run_on_ray(text, source, ray_address))
    return _results(_native.run_experiment(text=text, source=source, threads=threads))


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


def trace_info(
    trace: Union[str, os.PathLike],
    format: Optional[str] = None,
    page_size: Optional[int] = None,
) -> dict:
    """What ``tiermux trace info`` says of a block trace, as a dict:
    ``requests``, ``reads`` and ``writes`` (each with ``requests``,
    ``bytes``, ``pages``, ``unique_pages``, ``sequential_requests``),
    ``unique_pages``, ``footprint_bytes``, ``mean_request_bytes``,
    ``time_span_s``, and the arrivals: ``mean_gap_us``, ``gap_cv`` (1 for
    Poisson arrivals), ``idle_gaps``, ``idle_share`` and ``bursts``, the
    ``trace generate`` settings that give the same bursts (None when the
    trace has none).
    """
    return json.loads(_native.trace_info(os.fspath(trace), format=format, page_size=page_size))


def profiles() -> pd.DataFrame:
    """The built-in device profiles: name, description and source."""
    return _frame(_native.profiles())


def policies() -> pd.DataFrame:
    """The registered policies: name and summary."""
    return pd.DataFrame(_native.policies(), columns=["name", "summary"])
