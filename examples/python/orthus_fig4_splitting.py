"""Orthus Figure 4 (splitting panel, Optane+Flash) end to end from Python.

32 KiB uniform reads; a static split puts a fraction of the blocks on the
Optane SSD and the rest on the Flash SSD; throughput against that
fraction at concurrency 1, 4, 16 and 32. The paper: with more
concurrency, the best split is below 1 (the fast device alone is not the
peak). Writes the figure to orthus_fig4_splitting.png (or the path given).

    pip install ".[plot]"
    python examples/python/orthus_fig4_splitting.py [OUT.png]
"""

import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import tiermux  # noqa: E402

SPLITS = [round(0.1 * i, 1) for i in range(11)]
WORKERS = [1, 4, 16, 32]

experiment = {
    "name": "orthus-fig4-splitting",
    "description": "Orthus Figure 4, splitting on Optane+Flash",
    "base": {
        "devices": ["optane-905p", "flash-970pro"],
        "policy": "split",
        "block_size": 32768,
        "cache_blocks": 8192,
        "duration_s": 0.5,
        "warmup_s": 0.2,
        "client": {"workers": 1},
    },
    "sweep": [{"client.workers": WORKERS, "params.split_rate": SPLITS}],
}


def main(out: str) -> None:
    res = tiermux.run(experiment)
    runs = res.runs
    fig, ax = plt.subplots(figsize=(6, 4))
    for w, group in runs.groupby("client.workers"):
        group = group.sort_values("params.split_rate")
        ax.plot(group["params.split_rate"], group["throughput_bytes_per_s"] / 1e9, marker="o", label=f"{w} in flight")
        best = group.loc[group["throughput_bytes_per_s"].idxmax()]
        print(f"{w:>3} in flight: best split {best['params.split_rate']:.1f} at {best['throughput_bytes_per_s'] / 1e9:.2f} GB/s")
    ax.set_xlabel("split rate (fraction of blocks on the Optane SSD)")
    ax.set_ylabel("GB/s")
    ax.set_title("Orthus Figure 4: splitting on Optane+Flash")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"figure -> {out}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "orthus_fig4_splitting.png")
