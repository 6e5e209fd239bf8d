#!/usr/bin/env bash
# LRU and ARC miss ratios of `tiermux replay` beside libCacheSim's
# `cachesim` on an MSR-format trace, converted for cachesim by
# `tiermux trace convert` (one oracleGeneral record per 4 KiB page).
# The numbers cachesim prints are the golden values of
# crates/trace/tests/msr_golden.rs.
#
# Usage: scripts/check-msr-vs-libcachesim.sh [LIBCACHESIM_SOURCE_DIR] [TRACE]
# libCacheSim is built outside the repository (under target/peers) from a
# checkout of github.com/1a1a11a/libCacheSim; nothing of it is committed.
# Needs: cmake, libglib2.0-dev, libzstd-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
src="${1:-target/peers/libCacheSim}"
trace="${2:-traces/synthetic/wdev_0-50k.msr.zst}"
sizes=500,2000,8000,32000
if [ ! -x target/peers/libCacheSim-build/bin/cachesim ]; then
  mkdir -p target/peers/libCacheSim-build
  (cd target/peers/libCacheSim-build && cmake -DCMAKE_BUILD_TYPE=Release "$(realpath "../../../$src")" >/dev/null && make -j2 cachesim >/dev/null)
fi
cargo build --release -q
work=target/peers/msr-check
mkdir -p "$work"
./target/release/tiermux trace convert "$trace" --format msr "$work/trace.oracleGeneral"
for policy in lru arc; do
  echo "== $policy: tiermux"
  ./target/release/tiermux replay "$trace" --format msr --policy "$policy" --cache-pages "$sizes"
  echo "== $policy: cachesim"
  (cd "$work" && ../libCacheSim-build/bin/cachesim trace.oracleGeneral oracleGeneral "${policy^^}" "$sizes" --ignore-obj-size 1 2>/dev/null | grep "miss ratio")
done
