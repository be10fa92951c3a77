#!/bin/bash
# Interleaved rounds of two builds of libfabrpc, each rank pinned to its
# own core (rank r on CPU r), shm, sync calls with args and replies of
# each size; then the quartiles of each build's p50s.
# usage: run.sh OLD_LIBDIR NEW_LIBDIR OUTDIR ROUNDS [BUILD_DIR] [SIZES]
#   a LIBDIR holds a copy of BUILD_DIR/rpc/.libs/libfabrpc.so*
set -e
old=$1 new=$2 out=$3 n=$4 b=${5:-_b} sizes=${6:-8,4096,8000}
b=$(cd "$b" && pwd); mkdir -p "$out"
pin=$(mktemp); trap 'rm -f $pin' EXIT
printf '#!/bin/sh\nexec taskset -c ${FABRPC_RANK:-0} "$@"\n' > "$pin"
chmod +x "$pin"
run=$b/tools/.libs/fabrpc-run; [ -x "$run" ] || run=$b/tools/fabrpc-run
for r in $(seq 1 "$n"); do
  for v in old new; do
    lib=$old; [ $v = new ] && lib=$new
    LD_LIBRARY_PATH=$lib timeout 300 "$run" -n 2 --no-prefix "$pin" \
      "$b/tools/.libs/fabrpc-bench" latency --provider shm --sizes "$sizes" \
      --iters 50000 --json > "$out/pinned.$v.$r.json" 2>/dev/null || true
  done
done
python3 - "$out" <<'PY'
import collections, glob, json, statistics, sys
for v in ("old", "new"):
    p50 = collections.defaultdict(list)
    for f in glob.glob(f"{sys.argv[1]}/pinned.{v}.*.json"):
        for line in open(f):
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if j.get("system") == "fabrpc":
                p50[j["size"]].append(j["p50_us"])
    for size in sorted(p50):
        x = sorted(p50[size])
        print(f"{v} {size:>6} B: runs {len(x)} p50 us: min {x[0]:.2f} "
              f"q1 {x[len(x) // 4]:.2f} median {statistics.median(x):.2f} "
              f"q3 {x[3 * len(x) // 4]:.2f}")
PY
