#!/bin/bash
# bench-zerocopy.sh: what zero-copy calls do to a call's round trip. For
# each provider, in one run, interleaved: fabrpc-bench latency with
# FABRPC_ZEROCOPY_MIN=0 (every payload copied), with the default (args of
# 64 KiB and more lent) and with 1 (every args lent), each with --baseline
# (fi_pingpong of the same sizes in the same run). Rows are fabrpc-bench's
# JSON with "zerocopy_min" added (null for fi_pingpong's rows), RUNS times
# (default 3), one file per run: OUTDIR/run-N.jsonl. Then prints, per
# provider, size and setting, the median p50 and its ratio to fi_pingpong.
#
# usage: tools/bench-zerocopy.sh BUILDDIR OUTDIR [RUNS]
# Run it on an otherwise idle machine. tcp stays on loopback.
set -euo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 BUILDDIR OUTDIR [RUNS]" >&2
    exit 2
fi
build=$1 out=$2 runs=${3:-3}
bench=$build/tools/fabrpc-bench
[ -x "$bench" ] || { echo "$0: no $bench" >&2; exit 1; }
export FI_TCP_IFACE=${FI_TCP_IFACE:-lo}
: "${SIZES:=4k,64k,1m,16m}"
mkdir -p "$out"
for r in $(seq 1 "$runs"); do
    f=$out/run-$r.jsonl
    : >"$f"
    for p in shm tcp; do
        for z in 0 default 1; do
            if [ $z = default ]; then unset FABRPC_ZEROCOPY_MIN; tag=65536
            else export FABRPC_ZEROCOPY_MIN=$z; tag=$z; fi
            "$bench" latency --baseline --json --provider $p --sizes "$SIZES" \
                2>>"$f.err" | sed -e 's/^[^{]*{/{/' | grep '^{' |
                sed -e "/\"system\": *\"fabrpc\"/s/^{/{\"zerocopy_min\": $tag, /" \
                    -e "/\"zerocopy_min\"/!s/^{/{\"zerocopy_min\": null, /" >>"$f"
        done
    done
    unset FABRPC_ZEROCOPY_MIN
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys
rows = [json.loads(l) for f in sorted(glob.glob(sys.argv[1] + "/run-*.jsonl"))
        for l in open(f) if l.strip()]
by = {}
for d in rows:
    key = (d["provider"], d["size"], d["system"], d.get("zerocopy_min"))
    by.setdefault(key, []).append(d["p50_us"])
print("provider size zerocopy_min p50_us(median) ratio_to_fi_pingpong(median of runs' fi_pingpong)")
for (p, s, sysname, z), v in sorted(by.items(), key=lambda k: (k[0][0], k[0][1], str(k[0][3]))):
    if sysname != "fabrpc":
        continue
    base = by.get((p, s, "fi_pingpong", None))
    ratio = statistics.median(v) / statistics.median(base) if base else float("nan")
    print(f"{p} {s} {z} {statistics.median(v):.1f} {ratio:.2f}  (runs: {', '.join('%.1f' % x for x in v)})")
PY
