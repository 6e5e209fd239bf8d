#!/usr/bin/env bash
# The Hibachi paper's Figure 11 by its own method, through the engine:
# the storage writes of Hibachi and Hybrid-LRU (`tiermux replay
# --flush-log`, the ts_0 preset, half DRAM and half NVRAM) replayed by fio,
# one write at a time, through NBD onto a volume whose one device emulates
# the paper's RAID-5 array in real time (examples/raid5-array.toml). A
# whole log takes the emulated disks hours, so fio replays a slice of each:
# WRITES writes from the middle of the log. Beside each, the serial array
# model's throughput on the same slice (`iolog_raid5`) and on the whole log
# (`tiermux replay`'s RAID-5 column).
#
# Usage: scripts/hibachi-fig11-fio.sh [OUT_DIR [WRITES]]
#   OUT_DIR: default out/hibachi-fig11-fio; WRITES: default 4000 (about
#   40-50 s of emulated array time per slice).
# Needs: fio with its nbd engine (apt install fio).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-out/hibachi-fig11-fio}")
writes=${2:-4000}
sizes=32768,65536
cargo build --release -q -p tiermux-cli -p tiermux-device --example iolog_raid5
bin=$PWD/target/release
mkdir -p "$out"
"$bin/tiermux" trace generate "$out/ts_0.msr.zst" --preset ts_0 >/dev/null 2>&1
for policy in hybrid-lru hibachi; do
    "$bin/tiermux" replay "$out/ts_0.msr.zst" --policy "$policy" --dram-share 0.5 \
        --cache-pages "$sizes" --flush-log "$out/$policy" >"$out/$policy.txt"
done

cp examples/raid5-array.toml "$out/array.toml"
rm -rf "$out/meta" "$out/array.img" "$out/tiermux.sock"
"$bin/tiermux" serve "$out/array.toml" --data-dir "$out" >"$out/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    [ -S "$out/tiermux.sock" ] && break
    sleep 0.1
done
[ -S "$out/tiermux.sock" ] || { cat "$out/serve.log" >&2; exit 1; }

printf '%-11s %6s %9s %15s %15s %15s\n' policy pages writes "fio MB/s" "model, slice" "model, whole"
for size in ${sizes//,/ }; do
    for policy in hybrid-lru hibachi; do
        log="$out/$policy.$size"
        total=$(grep -c '^array write ' "$log")
        skip=$((total / 2))
        slice="$out/slice.$policy.$size"
        {
            printf 'fio version 2 iolog\narray add\narray open\n'
            awk -v s="$skip" -v n="$writes" '/^array write / { i++; if (i > s && i <= s + n) print }' "$log"
            printf 'array close\n'
        } >"$slice"
        fio_out=$(fio --name=replay --ioengine=nbd \
            --uri="nbd+unix:///tiermux?socket=$out/tiermux.sock" --read_iolog="$slice")
        echo "$fio_out" >"$slice.fio"
        # "WRITE: bw=392KiB/s (401kB/s), ...": the decimal figure, in MB/s.
        fio_mb_s=$(echo "$fio_out" | sed -n 's/.*WRITE: bw=[^(]*(\([0-9.]*\)\([kMG]\)B\/s).*/\1 \2/p' |
            awk '{ f = ($2 == "k") ? 1e-3 : ($2 == "G") ? 1e3 : 1; printf "%.3f", $1 * f }')
        slice_model=$("$bin/examples/iolog_raid5" "$log" "$skip" "$writes" | awk '{ print $3 }')
        whole_model=$(awk -v s="$size" '$1 == s { print $(NF-1); exit }' "$out/$policy.txt")
        printf '%-11s %6s %9s %15s %15s %15s\n' "$policy" "$size" "$writes" "$fio_mb_s" \
            "$slice_model" "$whole_model"
    done
done
