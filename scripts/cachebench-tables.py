#!/usr/bin/env python3
"""Derive the simulator's CacheBench tables from a CacheLib checkout.

MOST Table 4's four production mixes are CacheBench's `ssd_perf` configs
(flat_kvcache_reg, graph_cache_leader, kvcache_l2_reg, kvcache_l2_wc): their
op ratios and mean value sizes are the table's. Each config names a key
popularity file (`popularityBuckets`: objects per class, `popularityWeights`:
the class's accesses) and a value-size file (`valSizeRange`: sizes,
`valSizeRangeProbability`: their weights, a discrete distribution). This
script writes, for each mix, into crates/sim/data/cachebench/:

- MIX-popularity.csv: `objects,weight` per class, hottest (most accesses
  per object) first, every class of the source kept;
- MIX-values.csv: `bytes,weight`, the sizes cut into 1,024 runs of equal
  weight, each run one size, its weighted mean (so the mean is kept).

graph_cache_leader has two pools (fbobj and assoc), chosen per key by
`keyPoolDistribution` and per operation by `opPoolDistribution`; the tables
join them: a pool's objects are scaled to its key share, its weights to its
share of GETs (op share x getRatio), and its value sizes to its key share
(which gives Table 4's 860-byte mean).

Usage: scripts/cachebench-tables.py CACHELIB_CHECKOUT
"""

import json
import subprocess
import sys
from pathlib import Path

MIXES = {
    "flat-kvcache": "flat_kvcache_reg",
    "graph-leader": "graph_cache_leader",
    "kvcache-reg": "kvcache_l2_reg",
    "kvcache-wc": "kvcache_l2_wc",
}
SIZE_RUNS = 1024
OUT = Path(__file__).resolve().parent.parent / "crates/sim/data/cachebench"


def load(path):
    with open(path) as f:
        return json.load(f)


def pools(config_dir):
    """(key share, GET share, popularity file, size file) per pool."""
    cfg = load(config_dir / "config.json")["test_config"]
    dists = cfg.get("poolDistributions", [cfg])
    keys = cfg.get("keyPoolDistribution", [1.0])
    ops = cfg.get("opPoolDistribution", [1.0])
    return [
        (k, o * d["getRatio"], config_dir / d["popDistFile"], config_dir / d["valSizeDistFile"])
        for d, k, o in zip(dists, keys, ops)
    ]


def popularity(parts):
    classes = []
    for key_share, get_share, pop_file, _ in parts:
        d = load(pop_file)
        objects, weights = d["popularityBuckets"], d["popularityWeights"]
        assert len(objects) == len(weights) and all(n > 0 for n in objects)
        scale_o = key_share / sum(objects)
        scale_w = get_share / sum(weights)
        classes += [(n * scale_o, w * scale_w) for n, w in zip(objects, weights)]
    classes.sort(key=lambda c: c[1] / c[0], reverse=True)
    return classes


def value_sizes(parts):
    sizes = {}
    for key_share, _, _, size_file in parts:
        d = load(size_file)
        r, p = d["valSizeRange"], d["valSizeRangeProbability"]
        assert len(r) == len(p), "a discrete size distribution"
        total = sum(p)
        for s, w in zip(r, p):
            sizes[s] = sizes.get(s, 0.0) + w / total * key_share
    runs, run_mass, run_bytes = [], 0.0, 0.0
    step = sum(sizes.values()) / SIZE_RUNS
    for s in sorted(sizes):
        w = sizes[s]
        while w > 0:
            take = min(w, step - run_mass)
            run_mass += take
            run_bytes += take * s
            w -= take
            if run_mass >= step * (1 - 1e-9):
                runs.append((round(run_bytes / run_mass), run_mass))
                run_mass, run_bytes = 0.0, 0.0
    if run_mass > 1e-12:
        runs.append((round(run_bytes / run_mass), run_mass))
    return runs


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    repo = Path(sys.argv[1])
    base = repo / "cachelib/cachebench/test_configs/ssd_perf"
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip() or "unknown"
    OUT.mkdir(parents=True, exist_ok=True)
    for mix, folder in MIXES.items():
        parts = pools(base / folder)
        source = f"# from CacheLib {commit}, cachelib/cachebench/test_configs/ssd_perf/{folder}"
        with open(OUT / f"{mix}-popularity.csv", "w") as f:
            f.write(f"{source} ({', '.join(p[2].name for p in parts)})\n")
            f.write("objects,weight\n")
            for n, w in popularity(parts):
                f.write(f"{n:.9e},{w:.9e}\n")
        runs = value_sizes(parts)
        with open(OUT / f"{mix}-values.csv", "w") as f:
            f.write(f"{source} ({', '.join(p[3].name for p in parts)}), in {SIZE_RUNS} runs of equal weight\n")
            f.write("bytes,weight\n")
            for s, w in runs:
                f.write(f"{s},{w:.9e}\n")
        mean = sum(s * w for s, w in runs) / sum(w for _, w in runs)
        print(f"{mix}: {len(popularity(parts))} classes, {len(runs)} size runs, mean value {mean:.0f} B")


if __name__ == "__main__":
    main()
