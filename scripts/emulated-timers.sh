#!/usr/bin/env bash
# A pass-through volume on the tiering bench's emulated Optane-like device
# (experiments/bench/tiering.toml), served by this build and by an older
# binary in alternating rounds: fio's NBD engine reads N random 4 KiB blocks
# at QD requests in flight. Prints per round and build: requests/s, fio's
# mean latency, and the server's CPU time and context switches per request
# (from /proc, every thread of the server process).
#
# Usage: scripts/emulated-timers.sh OLD_TIERMUX_BINARY
# Environment: QD=32, N=100000, ROUNDS=5.
# Needs: fio (apt install fio), python3.
set -euo pipefail
cd "$(dirname "$0")/.."
old="$1"
qd="${QD:-32}" n="${N:-100000}" rounds="${ROUNDS:-5}"
cargo build --release -q
new=target/release/tiermux
work=$(mktemp -d /dev/shm/tiermux-timers.XXXX)
trap 'pkill -f "serve $work/vol.toml" 2>/dev/null || true; rm -rf "$work"' EXIT
python3 - "$work/vol.toml" <<'EOF'
import sys, tomllib
bench = tomllib.load(open("experiments/bench/tiering.toml", "rb"))
prof = next(p for p in bench["profile"] if p["name"] == "emu-optane")
def table(d):
    return "\n".join(f"{k} = {v!r}" if not isinstance(v, str) else f'{k} = "{v}"'
                     for k, v in d.items() if not isinstance(v, dict))
lines = ['size = "256MiB"', "block_size = 4096", f'listen = "unix:{sys.argv[1].rsplit("/", 1)[0]}/nbd.sock"',
         "[[device]]", 'name = "fast"', 'path = "fast.img"', 'profile = "emu-optane"',
         "[policy]", 'name = "passthrough"', "[[profile]]", table(prof),
         "[profile.read]", table(prof["read"]), "[profile.write]", table(prof["write"])]
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
EOF
round() {
  local bin=$1 label=$2
  rm -f "$work/fast.img" "$work/nbd.sock"; rm -rf "$work/meta"
  truncate -s 256M "$work/fast.img"
  "$bin" serve "$work/vol.toml" --data-dir "$work" >"$work/log" 2>&1 &
  local pid=$!
  for _ in $(seq 100); do [ -S "$work/nbd.sock" ] && break; sleep 0.02; done
  local c0 s0
  c0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  s0=$(awk '/ctxt_switches/ {s += $2} END {print s}' "/proc/$pid/status")
  local out
  out=$(fio --name=t --ioengine=nbd --uri="nbd+unix:///?socket=$work/nbd.sock" --bs=4096 \
    --iodepth="$qd" --size=256M --number_ios="$n" --norandommap --rw=randread \
    --output-format=terse | awk -F';' 'NF > 40 {print $6 / 4, $8, $40}')
  local c1 s1
  c1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  s1=$(awk '/ctxt_switches/ {s += $2} END {print s}' "/proc/$pid/status")
  kill -INT "$pid"; wait "$pid" || true
  python3 -c "
import sys, os
reqs, iops, lat = map(float, sys.argv[3].split())
tick = os.sysconf('SC_CLK_TCK')
cpu_us = (float(sys.argv[4]) - float(sys.argv[5])) / tick * 1e6 / reqs
cs = (float(sys.argv[6]) - float(sys.argv[7])) / reqs
print(f'{sys.argv[1]:>5} round {sys.argv[2]}: {iops:>8.0f} requests/s  mean {lat:>7.1f} us'
      f'  server CPU {cpu_us:5.1f} us/request  {cs:.2f} context switches/request')
" "$label" "$r" "$out" "$c1" "$c0" "$s1" "$s0"
}
for r in $(seq "$rounds"); do
  round "$old" old
  round "$new" new
done
