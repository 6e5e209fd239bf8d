#!/usr/bin/env bash
# Instructions per simulated request of `sim_speed`'s cases, counted by
# cachegrind: a figure that, unlike wall time, does not move with the
# machine's load, so two builds compare exactly. The working set is
# 10,000 blocks (it fits in the CPU's caches: compute, not memory stalls)
# and 1.5 s are simulated; the count includes building and pre-warming.
#
# Usage: scripts/sim-instructions.sh [SIM_SPEED_BINARY] [CASE...]
#   SIM_SPEED_BINARY: default target/release/examples/sim_speed (built
#   here when missing); CASE: a prefix of a case's label (default: all
#   four cases).
# Needs: valgrind (apt install valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/examples/sim_speed}
shift || true
if [ ! -x "$bin" ]; then
    cargo build --release -p tiermux-sim --example sim_speed
fi
cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
    cases=("classic lru wa" "classic lru wb" "most, read" "most, 30")
fi
printf '%-18s %12s %15s %12s\n' case requests instructions per_request
for c in "${cases[@]}"; do
    out=$(SIM_SPEED_BLOCKS=10000 SIM_SPEED_CASE="$c" SIM_SPEED_DURATION_S=1.5 \
        valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$bin" 2>&1)
    requests=$(echo "$out" | awk -v c="$c" 'index($0, c) == 1 { print $(NF-3) }')
    instructions=$(echo "$out" | awk '/I *refs:/ { gsub(",", "", $NF); print $NF }')
    if [ -z "$requests" ] || [ -z "$instructions" ]; then
        echo "case '$c': no result; sim_speed printed:" >&2
        echo "$out" >&2
        exit 1
    fi
    printf '%-18s %12s %15s %12.0f\n' "$c" "$requests" "$instructions" \
        "$(echo "$instructions / $requests" | bc -l)"
done
