#!/usr/bin/env bash
# Side-by-side replay speed: `tiermux replay` vs libCacheSim's `cachesim`
# (LRU and ARC) on the same >10M page-reference trace, in one run.
#
# The trace is the ARC paper's OLTP trace (traces/arc, see traces/README.md) repeated
# 12 times, each copy shifted to its own address range: 10.97M page
# references. tiermux reads it in the ARC format (multi-page requests
# expanded to pages); cachesim reads the same pages one per line ("txt").
#
# Usage: scripts/bench-replay-vs-libcachesim.sh [LIBCACHESIM_SOURCE_DIR]
# libCacheSim is built outside the repository (under target/peers) from a
# checkout of github.com/1a1a11a/libCacheSim; nothing of it is committed.
# Needs: cmake, libglib2.0-dev, libzstd-dev, zstd, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
src="${1:-target/peers/libCacheSim}"
trace="${TRACE:-traces/arc/OLTP.lis.zst}"
copies="${COPIES:-12}"
work=target/peers/bench
mkdir -p "$work"
if [ ! -x target/peers/libCacheSim-build/bin/cachesim ]; then
  mkdir -p target/peers/libCacheSim-build
  (cd target/peers/libCacheSim-build && cmake -DCMAKE_BUILD_TYPE=Release "$(realpath "../../../$src")" >/dev/null && make -j2 cachesim >/dev/null)
fi
cachesim=target/peers/libCacheSim-build/bin/cachesim
cargo build --release -q
zstd -dcq "$trace" | python3 -c '
import struct, sys
copies = int(sys.argv[1])
lines = sys.stdin.read().split("\n")
# oracleGeneralBin: u32 time, u64 object id, u32 size, i64 next access (-1: unknown).
rec = struct.Struct("<IQIq")
n = 0
with open(sys.argv[2], "w") as arc, open(sys.argv[3], "w") as txt, open(sys.argv[4], "wb") as binf:
    for c in range(copies):
        base = c * 10**9
        buf = bytearray()
        for line in lines:
            f = line.split()
            if len(f) < 2:
                continue
            start, count = int(f[0]) + base, int(f[1])
            arc.write(f"{start} {count} 0 0\n")
            txt.write("".join(f"{start + i}\n" for i in range(count)))
            for i in range(count):
                buf += rec.pack(n, start + i, 512, -1)
                n += 1
        binf.write(buf)
' "$copies" "$work/trace.lis" "$work/trace.txt" "$work/trace.oracleGeneral.bin"
refs=$(wc -l < "$work/trace.txt")
echo "trace: $copies x $(basename "$trace"), $refs page references"
secs() { local t0 t1; t0=$(date +%s.%N); "$@" > "$work/last.out" 2>&1; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
printf "%-8s %-10s %12s %12s %14s %12s\n" policy tool "cache pages" seconds "refs/s" "hit ratio"
for policy in lru arc; do
  for pages in 10000 100000; do
    t=$(secs ./target/release/tiermux replay "$work/trace.lis" --policy "$policy" --cache-pages "$pages")
    hit=$(awk '/^ *[0-9]/ {print $2}' "$work/last.out" | tail -1)
    printf "%-8s %-10s %12s %12.2f %14.0f %12s\n" "$policy" tiermux "$pages" "$t" "$(echo "$refs / $t" | bc -l)" "$hit"
    for fmt in oracleGeneralBin txt; do
      file="$work/trace.txt"
      [ "$fmt" = txt ] || file="$work/trace.oracleGeneral.bin"
      t2=$(secs "$cachesim" "$file" "$fmt" "${policy^^}" "$pages" --ignore-obj-size 1 -o "$work/cachesim-result.txt")
      hit2=$(grep -o "miss ratio [0-9.]*" "$work/last.out" | tail -1 | awk '{printf "%.2f", 100 * (1 - $3)}')
      printf "%-8s %-10s %12s %12.2f %14.0f %12s\n" "$policy" "cachesim ($fmt)" "$pages" "$t2" "$(echo "$refs / $t2" | bc -l)" "$hit2"
      echo "         tiermux / cachesim ($fmt) speed: $(echo "$t2 / $t" | bc -l | cut -c1-5)x"
    done
  done
done
