#!/bin/bash
# Instructions an 8 B frpc_get executes on the initiator (shm, busy
# progress), against raw libfabric's fi_read loop (fabrpc-bench rma
# --baseline), counted by callgrind: a figure the machine's state and
# load do not move, unlike a time.
#
# usage: run.sh BUILD_DIR OUT_DIR   (BUILD_DIR: a configured, built tree)
set -eu
B=$(cd "$1" && pwd)
OUT=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$B/rpc/.libs
BENCH="$B/tools/.libs/fabrpc-bench rma --provider shm --sizes 8 --inflight 1 --iters 20000 --progress busy --json"

# fabrpc: rank 0 under callgrind, collecting inside frpc_get only.
cat > "$OUT/rank.sh" <<EOS
#!/bin/bash
if [ "\$FABRPC_RANK" = 0 ]; then
  exec valgrind -q --tool=callgrind --dump-instr=yes --callgrind-out-file=$OUT/fabrpc.cg --toggle-collect=frpc_get $BENCH
fi
exec $BENCH
EOS
chmod +x "$OUT/rank.sh"
timeout 900 "$B/tools/fabrpc-run" -n 2 --provider shm --timeout 800 "$OUT/rank.sh" > "$OUT/fabrpc.log" 2>&1

# raw: every process under callgrind, collecting inside the raw loop's
# one-transfer step (raw_one: its reads and its writes).
rm -f "$OUT"/raw.cg.*
timeout 1800 valgrind -q --tool=callgrind --dump-instr=yes --trace-children=yes \
    --callgrind-out-file="$OUT/raw.cg.%p" --toggle-collect=raw_one \
    $BENCH --baseline > "$OUT/raw.log" 2>&1

# per_op FILE FUNCTION: instructions per call of FUNCTION: all of them,
# libfabric's, libc's, and the rest (the caller's own code: fabrpc's, or
# the raw loop's).
calls_of() {
    callgrind_annotate --tree=caller "$1" 2>/dev/null |
        grep -E "< .*:$2 \(" | head -1 | sed -E 's/.*\(([0-9,]+)x\).*/\1/; s/,//g'
}
per_op() {
    local calls
    calls=$(calls_of "$1" "$2")
    callgrind_annotate --auto=no --inclusive=no "$1" 2>/dev/null |
        awk -v n="$calls" -v fn="$2" '
            /PROGRAM TOTALS/ { t = $1; gsub(",", "", t) }
            /\[\/.*libfabric\.so/ { v = $1; gsub(",", "", v); fab += v }
            /\[\/.*(libc|ld-linux).*\.so/ { v = $1; gsub(",", "", v); c += v }
            END { printf "%s: %d calls, %.0f instructions each: libfabric %.0f, " \
                         "libc %.0f, the rest %.0f\n", fn, n, t / n, fab / n,
                         c / n, (t - fab - c) / n }'
}
# The atomic read-modify-writes among them (atomics.py): each ~20 cycles.
HERE=$(cd "$(dirname "$0")" && pwd)
per_op "$OUT/fabrpc.cg" frpc_get
python3 "$HERE/atomics.py" "$OUT/fabrpc.cg" "$(calls_of "$OUT/fabrpc.cg" frpc_get)"
for f in "$OUT"/raw.cg.*; do
    if grep -q raw_one "$f" 2>/dev/null; then
        per_op "$f" raw_one
        python3 "$HERE/atomics.py" "$f" "$(calls_of "$f" raw_one)"
    fi
done
