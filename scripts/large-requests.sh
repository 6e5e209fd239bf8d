#!/usr/bin/env bash
# Large sequential requests through NBD, side by side in one run: a
# pass-through volume served by `tiermux serve` (this build, and optionally
# an older binary), `nbdkit file` on the same file, and fio on the file
# itself. fio's NBD engine, one job, sequential reads or writes of BS at
# QD requests in flight, ROUNDS alternating rounds of RUNTIME_S seconds.
#
# Prints per round: MiB/s, the server's CPU time, context switches and
# system calls per request (`perf stat -p`, every thread of the server
# process), and the device operations the volume performed (reads + writes,
# from the stop line of `tiermux serve`).
#
# Usage: scripts/large-requests.sh [DIR] [OLD_TIERMUX_BINARY]
#   DIR: where the 1 GiB file goes (default /dev/shm: memory; give a
#        directory on a disk to measure the O_DIRECT io_uring path; nbdkit
#        is then left out, since it reads through the page cache).
# Environment: RW=read|write, BS=1m, QD=1, ROUNDS=3, RUNTIME_S=3;
# IDLE_CONNECTIONS=N holds N more connections open and idle on every
# tiermux server while fio runs (libnbd's Python module, python3-libnbd);
# NO_READ_AHEAD=1 adds this build with `read_ahead = false`; HUGE_FIO=DIR
# (a hugetlbfs mount with free huge pages, e.g. after
# `echo 64 > /proc/sys/vm/nr_hugepages; mount -t hugetlbfs none DIR`) adds
# fio on the file with its buffer in huge pages (`--iomem=mmaphuge`).
# Needs: fio, nbdkit, perf (apt install fio nbdkit linux-perf), python3.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-/dev/shm}"
old="${2:-}"
rw="${RW:-read}" bs="${BS:-1m}" qd="${QD:-1}" rounds="${ROUNDS:-3}" runtime="${RUNTIME_S:-3}"
# The servers and the idle connections' holder need a descriptor each.
[ -z "${IDLE_CONNECTIONS:-}" ] || ulimit -n $((IDLE_CONNECTIONS + 1024))
cargo build --release -q
new=target/release/tiermux
work=$(mktemp -d)
img="$dir/tiermux-large-requests.img"
trap 'pkill -f "serve $work/vol" 2>/dev/null || true; rm -rf "$work" "$img"' EXIT
python3 -c "
import sys
with open(sys.argv[1], 'wb') as f:
    for _ in range(1024): f.write(b'\x5a' * (1 << 20))" "$img"
cat > "$work/vol.toml" <<EOF
size = "1GiB"
block_size = 4096
listen = "unix:$work/nbd.sock"
[[device]]
name = "file"
path = "$img"
[policy]
name = "passthrough"
EOF
sed 's/^block_size = 4096$/block_size = 4096\nread_ahead = false/' "$work/vol.toml" > "$work/vol-no-ahead.toml"
in_memory=$([ "$(stat -f -c %T "$dir")" = tmpfs ] && echo 1 || echo 0)

# fio through NBD at $1 (a socket); prints "MiB/s requests".
nbd_fio() {
  fio --name=s --ioengine=nbd --uri="nbd+unix:///?socket=$1" --rw="$rw" --bs="$bs" \
    --iodepth="$qd" --size=1g --time_based --runtime="$runtime" \
    --output-format=json --output="$work/f.json" >/dev/null 2>&1
  python3 -c "
import json; j = json.load(open('$work/f.json'))['jobs'][0]
print(round((j['read']['bw'] + j['write']['bw']) / 1024), j['read']['total_ios'] + j['write']['total_ios'])"
}

# Runs fio through NBD at socket $1 while `perf stat` counts the CPU time
# and context switches of process $2 (all its threads, new ones too);
# prints a table row named $3, with device operations $4.
measured() {
  perf stat -e task-clock,context-switches,raw_syscalls:sys_enter -x, -p "$2" -o "$work/perf" &
  local perf_pid=$! r
  sleep 0.2
  r=$(nbd_fio "$1")
  kill -INT $perf_pid; wait $perf_pid 2>/dev/null || true
  python3 -c "
import sys
name, bw_reqs, ops, path = sys.argv[1:5]
bw, reqs = map(int, bw_reqs.split())
v = {}
for line in open(path):
    f = line.strip().split(',')
    if len(f) > 2: v[f[2]] = float(f[0])
print(f'| {name} | {bw} | {v[\"task-clock\"] * 1e3 / reqs:.0f} | {v[\"context-switches\"] / reqs:.1f} | {v[\"raw_syscalls:sys_enter\"] / reqs:.2f} | {ops} |')" "$3" "$r" "$4" "$work/perf"
}

# Opens $IDLE_CONNECTIONS connections to socket $1 and holds them idle
# until killed; returns once they are open.
hold_idle() {
  rm -f "$work/idle-open"
  /usr/bin/python3 -c "
import nbd, sys, time
held = []
for _ in range(int(sys.argv[2])):
    h = nbd.NBD(); h.connect_uri('nbd+unix:///?socket=' + sys.argv[1]); held.append(h)
open(sys.argv[3], 'w').close()
time.sleep(3600)" "$1" "$IDLE_CONNECTIONS" "$work/idle-open" &
  idle_pid=$!
  while [ ! -f "$work/idle-open" ]; do sleep 0.1; done
}

serve_round() { # binary label [config]
  rm -f "$work/nbd.sock"
  "$1" serve "${3:-$work/vol.toml}" --data-dir "$work" > /dev/null 2> "$work/serve.log" &
  local pid=$!
  while [ ! -S "$work/nbd.sock" ]; do sleep 0.05; done
  local row ops label="$2"
  if [ -n "${IDLE_CONNECTIONS:-}" ]; then
    hold_idle "$work/nbd.sock"
    label="$label, $IDLE_CONNECTIONS idle connections"
  fi
  row=$(measured "$work/nbd.sock" $pid "$label" OPS)
  [ -z "${IDLE_CONNECTIONS:-}" ] || { kill "$idle_pid"; wait "$idle_pid" 2>/dev/null || true; }
  kill $pid; wait $pid 2>/dev/null || true
  ops=$(grep -o "file read .* in [0-9]* operations, wrote .* in [0-9]*" "$work/serve.log" |
    sed 's/.* in \([0-9]*\) operations, wrote .* in \([0-9]*\)/\1 + \2/' || true)
  echo "${row/OPS/${ops:-not counted}}"
}

kit_round() {
  rm -f "$work/kit.sock"
  nbdkit -P "$work/kit.pid" -U "$work/kit.sock" file "$img"
  while [ ! -S "$work/kit.sock" ]; do sleep 0.05; done
  local pid
  pid=$(cat "$work/kit.pid")
  measured "$work/kit.sock" "$pid" "nbdkit file" "-"
  kill "$pid"
}

direct_round() { # [fio flags...]
  local flags=(--ioengine=io_uring --iodepth="$qd")
  [ "$qd" != 1 ] || flags=(--ioengine=psync)
  [ "$in_memory" = 1 ] || flags+=(--direct=1)
  local bw
  bw=$(fio --name=d --filename="$img" --rw="$rw" --bs="$bs" \
    "${flags[@]}" "$@" --time_based --runtime="$runtime" --output-format=terse | awk -F';' '{print int(($7 + $48) / 1024)}')
  echo "| fio on the file ($([ "$in_memory" = 1 ] || echo "O_DIRECT, ")${flags[0]#--ioengine=}$([ $# = 0 ] || echo ", buffer in huge pages")) | $bw | - | - | - | - |"
}

echo "$rw of $bs at $qd in flight, file in $dir ($([ "$in_memory" = 1 ] && echo memory || echo disk))"
echo
echo "| server | MiB/s | server CPU µs per request | context switches per request | system calls per request | device operations |"
echo "|---|---|---|---|---|---|"
for _ in $(seq "$rounds"); do
  serve_round "$new" "tiermux serve"
  [ -z "${NO_READ_AHEAD:-}" ] || serve_round "$new" "tiermux serve, read_ahead = false" "$work/vol-no-ahead.toml"
  [ -z "$old" ] || serve_round "$old" "tiermux serve ($(basename "$old"))"
  [ "$in_memory" = 0 ] || kit_round
  direct_round
  [ -z "${HUGE_FIO:-}" ] || direct_round --iomem=mmaphuge:"$HUGE_FIO/tiermux-fio"
done
