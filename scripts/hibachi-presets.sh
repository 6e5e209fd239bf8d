#!/usr/bin/env bash
# The Hibachi paper's sweep (read hit ratio, write hit ratio, storage
# write runs and their modelled RAID-5 throughput, 8 MB to 256 MB of cache,
# half DRAM and half NVRAM) for Hibachi, Hybrid-LRU and Hybrid-ARC on the
# four synthetic MSR-like presets. Prints one block per preset and policy.
#
# Usage: scripts/hibachi-presets.sh [OUT_DIR] [PRESETS...]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-out/hibachi}"
shift || true
presets=("${@:-rsrch_0 wdev_0 stg_0 ts_0}")
mkdir -p "$out"
cargo build --release -q
for preset in ${presets[*]}; do
  trace="$out/$preset.msr.zst"
  [ -f "$trace" ] || ./target/release/tiermux trace generate "$trace" --preset "$preset" > /dev/null
  for policy in hybrid-lru hybrid-arc hibachi; do
    echo "== $preset $policy"
    ./target/release/tiermux replay "$trace" --format msr --policy "$policy" --dram-share 0.5 \
      --cache-pages 2048,4096,8192,16384,32768,65536 | sed -n '2,8p'
  done
done
