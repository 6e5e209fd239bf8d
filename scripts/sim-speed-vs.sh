#!/usr/bin/env bash
# Simulator speed against an older build, side by side: `sim_speed` of this
# tree and of BASE (a git revision) run in turn, ROUNDS times, and each
# round's requests per second are paired case by case. Absolute rates move
# several-fold between machines and with a shared machine's load; the
# ratio of two builds run one after the other moves far less, and it is
# what carries over to another machine.
#
# Prints every round's rates, then per case: the median rate of each build
# and the median, least and greatest of the per-round ratios (this / base).
# A case that the base does not have is left out of the ratios.
#
# Usage: scripts/sim-speed-vs.sh [BASE] [ROUNDS]
#   BASE: default f32f42c, the build whose rates the first section of
#         docs/performance.md records (classic caching 1.09 M requests/s
#         read-only on the machine of that day); ROUNDS: default 6.
# The base is built in a temporary worktree with its own target directory
# (a first build takes a few minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
base_rev="${1:-f32f42c}"
rounds="${2:-6}"
work=$(mktemp -d)
trap 'git worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
cargo build --release -q -p tiermux-sim --example sim_speed
cp target/release/examples/sim_speed "$work/this"
git worktree add -q --detach "$work/base" "$base_rev"
base_target="${BASE_TARGET_DIR:-$PWD/target/sim-speed-base}"
(cd "$work/base" && CARGO_TARGET_DIR="$base_target" \
    cargo build --release -q -p tiermux-sim --example sim_speed)
cp "$base_target/release/examples/sim_speed" "$work/base_bin"
for round in $(seq "$rounds"); do
    # A table row is: label (words), requests, wall s, requests/s, ratio.
    "$work/base_bin" | awk -v r="$round" 'NR > 1 { printf "base %s %s|%s\n", r, $(NF-1), substr($0, 1, 28) }'
    "$work/this" | awk -v r="$round" 'NR > 1 { printf "this %s %s|%s\n", r, $(NF-1), substr($0, 1, 28) }'
done >"$work/rates"
awk -F'|' '
    { split($1, f, " "); build = f[1]; round = f[2]; rate = f[3]; c = $2
      sub(/ +$/, "", c)
      printf "%-5s round %-3s %-28s %12d requests/s\n", build, round, c, rate
      rates[build, c, round] = rate; cases[c] = 1; n = (round > n ? round : n) }
    function median(a, k,    i, j, t) {
        for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
        return k % 2 ? a[(k+1)/2] : (a[k/2] + a[k/2+1]) / 2 }
    END {
        printf "\n%-28s %14s %14s %8s %8s %8s\n", "case", "this (median)", "base (median)", "ratio", "least", "most"
        for (c in cases) {
            if (!(("base", c, 1) in rates)) continue
            for (r = 1; r <= n; r++) { t[r] = rates["this", c, r]; b[r] = rates["base", c, r]; q[r] = t[r] / b[r] }
            lo = q[1]; hi = q[1]; for (r = 2; r <= n; r++) { if (q[r] < lo) lo = q[r]; if (q[r] > hi) hi = q[r] }
            printf "%-28s %14.0f %14.0f %8.2f %8.2f %8.2f\n", c, median(t, n), median(b, n), median(q, n), lo, hi
        }
    }' "$work/rates"
