"""The tiermux Python package against the tiermux command and against
values worked out by hand.

Run after `pip install ".[test]"` and `cargo build --release` (the
command's binary is target/release/tiermux): `pytest crates/python/tests`.
"""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import tiermux

ROOT = Path(__file__).resolve().parents[3]
BINARY = ROOT / "target" / "release" / "tiermux"

EXPERIMENT_TOML = """
name = "py-check"
description = "classic caching and NHC, short runs"

[base]
devices = ["optane-905p", "flash-970pro"]
policy = "classic"
block_size = 65536
cache_blocks = 2048
duration_s = 0.4
warmup_s = 0.1
sample_interval_ms = 100

[base.workload]
working_set_blocks = 2560

[base.client]
workers = 32

[[sweep]]
policy = ["classic", "nhc"]

[[paper]]
source = "Orthus Figure 9"
what = "NHC / classic"
paper = 1.46
y = "throughput_ops_per_s"
filter = { policy = "nhc" }
ratio_to = { column = "policy", value = "classic" }
"""

EXPERIMENT_DICT = {
    "name": "py-check",
    "description": "classic caching and NHC, short runs",
    "base": {
        "devices": ["optane-905p", "flash-970pro"],
        "policy": "classic",
        "block_size": 65536,
        "cache_blocks": 2048,
        "duration_s": 0.4,
        "warmup_s": 0.1,
        "sample_interval_ms": 100,
        "workload": {"working_set_blocks": 2560},
        "client": {"workers": 32},
    },
    "sweep": [{"policy": ["classic", "nhc"]}],
    "paper": [
        {
            "source": "Orthus Figure 9",
            "what": "NHC / classic",
            "paper": 1.46,
            "y": "throughput_ops_per_s",
            "filter": {"policy": "nhc"},
            "ratio_to": {"column": "policy", "value": "classic"},
        }
    ],
}


def command(*args, cwd=None):
    assert BINARY.exists(), f"build the command first: cargo build --release ({BINARY})"
    return subprocess.run([str(BINARY), *map(str, args)], capture_output=True, text=True, cwd=cwd)


@pytest.fixture(scope="module")
def command_results(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    (d / "exp.toml").write_text(EXPERIMENT_TOML)
    out = command("sim", d / "exp.toml", "--out", d / "out")
    assert out.returncode == 0, out.stderr
    return d / "out"


def test_a_file_gives_the_commands_tables(command_results, tmp_path):
    path = tmp_path / "exp.toml"
    path.write_text(EXPERIMENT_TOML)
    res = tiermux.run(path, threads=1)
    assert res.name == "py-check"
    for table, key, file in [
        (res.runs, "runs", "results.csv"),
        (res.timeseries, "timeseries", "timeseries.csv"),
        (res.paper, "paper", "paper.csv"),
    ]:
        assert res.csv[key] == (command_results / file).read_text(), file
        pd.testing.assert_frame_equal(table, pd.read_csv(command_results / file))


def test_a_dict_is_the_same_experiment_as_its_file(command_results):
    res = tiermux.run(EXPERIMENT_DICT)
    pd.testing.assert_frame_equal(res.runs, pd.read_csv(command_results / "results.csv"))
    nhc = res.runs.set_index("policy")["throughput_ops_per_s"]
    assert res.paper["ours"][0] == pytest.approx(nhc["nhc"] / nhc["classic"], rel=1e-4)


@pytest.fixture(scope="module")
def ray_head():
    """A local Ray cluster: `ray start --head`, stopped afterwards."""
    ray_cli = Path(sys.executable).parent / "ray"
    port = "6391"
    start = [str(ray_cli), "start", "--head", f"--port={port}", "--num-cpus=2", "--disable-usage-stats", "--include-dashboard=false"]
    out = subprocess.run(start, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    yield f"127.0.0.1:{port}"
    import ray

    ray.shutdown()
    subprocess.run([str(ray_cli), "stop"], capture_output=True)


def test_a_sweep_on_ray_gives_the_same_bytes_as_locally(ray_head, command_results):
    sweep = {**EXPERIMENT_DICT, "sweep": [{"policy": ["classic", "nhc"], "client.workers": [8, 32]}]}
    local = tiermux.run(sweep, threads=2)
    on_ray = tiermux.run(sweep, ray_address=ray_head)
    assert len(local.runs) == 4
    assert on_ray.csv == local.csv
    # And the same as the command's file for the runs both sweeps share.
    same = tiermux.run(EXPERIMENT_DICT, ray_address=ray_head)
    assert same.csv["runs"] == (command_results / "results.csv").read_text()


def test_errors_carry_the_commands_message(tmp_path):
    bad = EXPERIMENT_TOML.replace('policy = "classic"\n', 'policy = "classic"\ncolour = "red"\n', 1)
    path = tmp_path / "bad.toml"
    path.write_text(bad)
    out = command("sim", path, "--out", tmp_path / "out")
    assert out.returncode != 0
    with pytest.raises(tiermux.TiermuxError) as e:
        tiermux.run(path)
    assert "colour" in str(e.value)
    assert out.stderr.strip() == f"error: {e.value}"
    with pytest.raises(tiermux.TiermuxError, match="unknown policy|no policy|nope"):
        tiermux.run({**EXPERIMENT_DICT, "sweep": [{"policy": ["nope"]}]})
    with pytest.raises(TypeError):
        tiermux.run(42)
    missing = tmp_path / "missing.toml"
    out = command("sim", missing)
    with pytest.raises(tiermux.TiermuxError) as e:
        tiermux.run(missing)
    assert out.stderr.strip() == f"error: {e.value}"


def test_lru_replay_matches_hand_counted_hits(tmp_path):
    # ARC-format trace (start block, blocks, ignored, request number) of
    # 512-byte pages A B A C A B: a 2-page LRU misses A, B, hits A, misses
    # C (evicting B), hits A, misses B: 2 hits in 6. With 3 pages only the
    # three first references miss: 3 hits.
    pages = [0, 1, 0, 2, 0, 1]
    trace = tmp_path / "t.arc"
    trace.write_text("".join(f"{p} 1 0 {i}\n" for i, p in enumerate(pages)))
    df = tiermux.replay(trace, [2, 3], format="arc")
    assert list(df["cache_pages"]) == [2, 3]
    assert list(df["hit_ratio"]) == [pytest.approx(2 / 6), pytest.approx(3 / 6)]
    out = command("replay", trace, "--format", "arc", "--cache-pages", "2,3")
    assert out.returncode == 0, out.stderr
    assert "33.33" in out.stdout and "50.00" in out.stdout
    classic = tiermux.replay(trace, [2], policy="classic", format="arc")
    assert classic["hit_ratio"][0] == pytest.approx(2 / 6)
    with pytest.raises(tiermux.TiermuxError, match="takes no parameters"):
        tiermux.replay(trace, 2, policy="lru", format="arc", params={"x": 1})
    with pytest.raises(tiermux.TiermuxError):
        tiermux.replay(tmp_path / "missing.arc", 2)


def test_trace_info_counts_requests_and_arrivals(tmp_path):
    # An MSR trace (times in 100 ns ticks) of two bursts of three 4 KiB
    # requests 10 us apart, 1 ms between the bursts: the same numbers as
    # the command's, and the bursts read back as generator settings.
    times_us = [0, 10, 20, 1020, 1030, 1040]
    ops = ["Read", "Write", "Read", "Read", "Write", "Write"]
    trace = tmp_path / "t.msr"
    trace.write_text(
        "".join(f"{t * 10},h,0,{op},{i * 4096},4096,0\n" for i, (t, op) in enumerate(zip(times_us, ops)))
    )
    info = tiermux.trace_info(trace)
    assert info["requests"] == 6
    assert (info["reads"]["requests"], info["writes"]["requests"]) == (3, 3)
    assert info["footprint_bytes"] == 6 * 4096
    # The reads at 8 KiB and 12 KiB are consecutive.
    assert info["reads"]["sequential_requests"] == 1
    assert info["mean_gap_us"] == pytest.approx(1040 / 5)
    assert info["idle_gaps"] == 1
    assert info["bursts"]["mean_interarrival_us"] == pytest.approx(10.0)
    assert info["bursts"]["burst_idle_us"] == pytest.approx(800.0)
    out = command("trace", "info", trace)
    assert out.returncode == 0, out.stderr
    assert "burst_idle_us=800" in out.stdout
    with pytest.raises(tiermux.TiermuxError):
        tiermux.trace_info(tmp_path / "missing.msr")


def test_profiles_and_policies_are_listed():
    names = set(tiermux.profiles()["name"])
    assert {"optane-905p", "flash-970pro", "nvme-pcie3"} <= names
    policies = tiermux.policies()
    assert {"classic", "nhc", "most", "hibachi", "tica-a"} <= set(policies["name"])
    # The command's listing: a line per policy, then indented lines of its
    # devices and parameters.
    listed = [l.split()[0] for l in command("policies").stdout.split("\n") if l and not l[0].isspace()]
    assert list(policies["name"]) == listed


def test_the_example_reproduces_orthus_figure_4(tmp_path):
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "python" / "orthus_fig4_splitting.py"), str(tmp_path / "f.png")],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    # The paper: with more concurrency the best split is below 1.
    best = {int(l.split()[0]): float(l.split("best split ")[1].split()[0]) for l in out.stdout.splitlines() if "best split" in l}
    assert best[1] == 1.0 and best[16] < 1.0 and best[32] < 1.0, out.stdout
    assert (tmp_path / "f.png").stat().st_size > 10_000
