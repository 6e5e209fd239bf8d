#!/usr/bin/env bash
# The TICA paper's comparison in trace replay: uCache, S-RAC, TICA-EF,
# TICA-WED and TICA-A on the synthetic presets of its Table 2, each SSD
# 10 % and the DRAM 1 % of the trace's distinct pages (the paper's §5.1).
# Prints one row per workload and policy (hit ratios, pages written to the
# two SSDs, their cache write amplification CWAF = SSD page writes per
# page the workload writes (the paper's equation 1), pages written home),
# then each policy's mean over the workloads of its hit ratio and SSD
# writes relative to uCache's, and its mean CWAF.
#
# Usage: scripts/tica-presets.sh [OUT_DIR] [PRESETS...]
# REQUESTS (default 300000) sets the requests per preset.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-out/tica}"
shift || true
requests="${REQUESTS:-300000}"
all="tpcc webserver devtoolrel livemapsbe msnfs exchange postmark stg_1 rsrch_0 src1_2 wdev_0 ts_0 usr_0 hm_1 mds_0 prn_0 prxy_0"
presets=("${@:-$all}")
policies="ucache s-rac tica-ef tica-wed tica-a"
mkdir -p "$out"
cargo build --release -q
bin=./target/release/tiermux
rows="$out/rows.txt"
echo "workload policy ssd_pages hit_pct read_hit_pct write_hit_pct ssd_writes cwaf stored_pages" > "$rows"
for preset in ${presets[*]}; do
  trace="$out/$preset-$requests.msr.zst"
  [ -f "$trace" ] || $bin trace generate "$trace" --preset "$preset" --set "requests=$requests" > /dev/null
  info=$($bin trace info "$trace" --format msr)
  distinct=$(echo "$info" | awk '$1 == "pages" {print $7}')
  written=$(echo "$info" | awk '$1 == "writes" {print $7}')
  ssd=$((distinct / 10))
  for policy in $policies; do
    # Columns: size, hit, read, dram, ro, wo, write, ro wr, wo wr, stored.
    $bin replay "$trace" --format msr --policy "$policy" --cache-pages "$ssd" | sed -n 3p |
      awk -v w="$preset" -v p="$policy" -v n="$written" \
        '{printf "%s %s %s %s %s %s %d %.3f %s\n", w, p, $1, $2, $3, $7, $8 + $9, ($8 + $9) / n, $10}' >> "$rows"
  done
done
column -t "$rows"
echo
echo "mean over workloads: hit ratio and SSD writes relative to ucache's, CWAF:"
awk 'NR > 1 {
  hit[$1, $2] = $4; wr[$1, $2] = $7; cwaf[$1, $2] = $8; seen[$1] = 1; pol[$2] = 1
} END {
  for (p in pol) {
    n = 0; h = 0; s = 0; c = 0
    for (w in seen) {
      if (hit[w, "ucache"] > 0) { h += hit[w, p] / hit[w, "ucache"] }
      if (wr[w, "ucache"] > 0) { s += wr[w, p] / wr[w, "ucache"] }
      c += cwaf[w, p]
      n++
    }
    printf "%-9s hit %.3f  ssd writes %.3f  cwaf %.3f\n", p, h / n, s / n, c / n
  }
}' "$rows" | sort
