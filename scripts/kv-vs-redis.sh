#!/usr/bin/env bash
# The key-value server's front-end cost: the same redis-benchmark GET load
# against `tiermux kv serve` (a DRAM-only cache: every GET a DRAM hit) and
# against redis-server on this machine, in alternating rounds, with the
# ratio of each round and the server CPU per request.
# Usage: scripts/kv-vs-redis.sh [ROUNDS] [PIPELINE]   (needs redis-server, redis-tools)
set -euo pipefail
rounds=${1:-3}
pipeline=${2:-16}
root=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release -q --manifest-path "$root/Cargo.toml" -p tiermux-cli
dir=$(mktemp -d /dev/shm/tiermux-kv-vs-redis.XXXXXX)
trap 'kill $kv_pid 2>/dev/null; redis-cli -p 7402 shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
cat > "$dir/kv.toml" <<TOML
size = "64MiB"
[[device]]
name = "home"
path = "home.img"
[policy]
name = "passthrough"
[kv]
listen = "tcp:127.0.0.1:7401"
dram = "1GiB"
TOML
"$root/target/release/tiermux" kv serve "$dir/kv.toml" --data-dir "$dir" > "$dir/out" 2> "$dir/err" &
kv_pid=$!
redis-server --port 7402 --save "" --appendonly no --daemonize yes --dir "$dir" > /dev/null
sleep 1
redis_pid=$(redis-cli -p 7402 info server | sed -n 's/^process_id:\([0-9]*\).*/\1/p' | tr -d '\r')
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
n=300000
for p in 7401 7402; do
  redis-benchmark -p $p -t set -n 20000 -r 10000 -d 100 -q > /dev/null
done
echo "round,server,get_per_s,cpu_us_per_get"
for r in $(seq "$rounds"); do
  declare -A rate
  for which in tiermux redis; do
    if [ $which = tiermux ]; then port=7401; pid=$kv_pid; else port=7402; pid=$redis_pid; fi
    before=$(cpu_ticks "$pid")
    rps=$(redis-benchmark -p $port -t get -n $n -r 10000 -d 100 -c 50 -P "$pipeline" --csv | tail -1 | cut -d, -f2 | tr -d '"')
    after=$(cpu_ticks "$pid")
    cpu=$(awk -v t=$((after - before)) -v hz="$hz" -v n=$n 'BEGIN {printf "%.2f", t / hz * 1e6 / n}')
    rate[$which]=$rps
    echo "$r,$which,$rps,$cpu"
  done
  awk -v a="${rate[tiermux]}" -v b="${rate[redis]}" -v r="$r" 'BEGIN {printf "round %d: tiermux/redis GET throughput %.2f\n", r, a / b}'
done
