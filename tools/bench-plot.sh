#!/bin/bash
# bench-plot.sh: turns fabrpc-bench --json output into PNG plots (needs
# Debian's gnuplot-nox):
#   PREFIX-latency.png  round trip p50 vs size, fabrpc and fi_pingpong,
#                       one line per system and provider
#   PREFIX-rate.png     async calls/s vs calls in flight, per provider,
#                       with and without --batch
#   PREFIX-bandwidth.png  MB/s vs size, one transfer at a time (W 1):
#                       fabrpc get, put and calls (bandwidth mode), raw
#                       libfabric fi_read/fi_write and memcpy (rma
#                       --baseline), per provider
#
# usage: tools/bench-plot.sh RESULTS.jsonl PREFIX
# RESULTS.jsonl: lines from `fabrpc-bench latency --baseline --json`,
# `fabrpc-bench rate [--batch] --json`, `fabrpc-bench bandwidth --json` and
# `fabrpc-bench rma --baseline --json` (any order, several providers; lines that are
# not JSON objects, e.g. "[0] " prefixes from fabrpc-run, are stripped).
set -euo pipefail

case "${1:-}" in -h|--help) echo "usage: $0 RESULTS.jsonl PREFIX"; exit 0 ;; esac
if [ $# -ne 2 ]; then
    echo "usage: $0 RESULTS.jsonl PREFIX" >&2
    exit 2
fi
in=$1 prefix=$2
command -v gnuplot >/dev/null || {
    echo "$0: gnuplot not found: apt-get install gnuplot-nox" >&2
    exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Splits the rows into one data file per metric, system and provider.
extract() {
    sed -e 's/^[^{]*{/{/' "$in" | grep '^{' | awk -v dir="$tmp" '
    function field(name,   m) {
        if (match($0, "\"" name "\":(\"[^\"]*\"|[^,}]*)")) {
            m = substr($0, RSTART + length(name) + 3, RLENGTH - length(name) - 3)
            gsub(/"/, "", m)
            return m
        }
        return ""
    }
    {
        sys = field("system"); prov = field("provider"); metric = field("metric")
        if (metric == "latency" && field("p50_us") != "null")
            print field("size"), field("p50_us") >> (dir "/lat_" sys "_" prov)
        if (metric == "rate_batched")
            sys = sys "-batched"
        if ((metric == "rate" || metric == "rate_batched") &&
            field("calls_per_s") != "null")
            print field("inflight"), field("calls_per_s") >> (dir "/rate_" sys "_" prov)
        if ((metric == "get" || metric == "put" || metric == "bandwidth" ||
             metric == "raw_read" || metric == "raw_write" ||
             metric == "memcpy") && field("inflight") == 1 &&
            field("mb_per_s") != "null")
            print field("size"), field("mb_per_s") >> (dir "/bw_" sys "-" metric "_" prov)
    }'
}
extract

# median_by_x FILE: several runs give several "x y" rows per x; keep one,
# the median (the lower middle one for an even count), sorted by x.
median_by_x() {
    sort -k1,1n -k2,2g "$1" | awk '
    function flush() { if (n) print x, v[int((n + 1) / 2)]; n = 0 }
    $1 != x { flush(); x = $1 }
    { v[++n] = $2 }
    END { flush() }' >"$1.med"
    mv "$1.med" "$1"
}

plot_list() { # PATTERN: a gnuplot "plot" argument list over matching files
    local sep="" f name
    for f in "$tmp"/$1; do
        [ -e "$f" ] || continue
        name=${f##*/}
        name=${name#*_}         # SYSTEM_PROVIDER (SYSTEM may hold "_")
        median_by_x "$f"
        printf '%s"%s" using 1:2 with linespoints title "%s on %s"' "$sep" "$f" \
            "${name%_*}" "${name##*_}"
        sep=", "
    done
}

lat=$(plot_list 'lat_*')
rate=$(plot_list 'rate_*')
[ -n "$lat" ] && gnuplot <<EOF
set terminal pngcairo size 900,560 noenhanced
set output "$prefix-latency.png"
set title "Round trip of a call vs payload size (p50, median of runs; fi_pingpong: 2 x usec/xfer)"
set logscale xy
set xlabel "payload bytes (args and reply)"
set ylabel "round trip, us"
set grid
set key top left
plot $lat
EOF
[ -n "$rate" ] && gnuplot <<EOF
set terminal pngcairo size 900,560 noenhanced
set output "$prefix-rate.png"
set title "Async 8-byte calls per second vs calls in flight (median of runs)"
set logscale x 2
set logscale y
set xlabel "calls in flight"
set ylabel "calls/s"
set grid
set key top left
plot $rate
EOF
bw=$(plot_list 'bw_*')
[ -n "$bw" ] && gnuplot <<EOF
set terminal pngcairo size 900,560 noenhanced
set output "$prefix-bandwidth.png"
set title "One transfer at a time (W 1): MB/s vs size (median of runs)"
set logscale xy
set xlabel "bytes per transfer"
set ylabel "MB/s"
set grid
set key top left
plot $bw
EOF
ls "$prefix"-*.png
