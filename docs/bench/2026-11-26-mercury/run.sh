#!/bin/bash
# Per window W: Mercury hg_rate, fabrpc rate (coalescing off, busy) with its
# raw libfabric baseline, Mercury again -- back to back, so that a round
# whose two Mercury runs disagree (the machine changed state) can be set aside.
# usage: run.sh OUTDIR ROUNDS [FABRPC_BUILD_DIR] [MERCURY_BIN_DIR]
# Mercury 2.4.1 built from source: cmake -DCMAKE_BUILD_TYPE=Release
#   -DNA_USE_OFI=ON -DNA_USE_SM=ON -DBUILD_TESTING=ON -DBUILD_TESTING_UNIT=OFF
#   -DBUILD_TESTING_PERF=ON -DMERCURY_USE_BOOST_PP=OFF -DBUILD_EXAMPLES=OFF
#   (its hg_rate posts W calls and waits for all W; -b busy polling).
mkdir -p "$1"; out=$(cd "$1" && pwd); n=$2
B=${3:-_b}; M=${4:-/tmp/mercury/build/bin}; B=$(cd "$B" && pwd)
export FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo
hg() { # prov w file
  local p=$1 w=$2 d; d=$(mktemp -d); cd $d
  local loops=$(( 200000 / w )); [ $p = tcp ] && loops=$(( 40000 / w ))
  local H=""; [ $p = tcp ] && H="-H 127.0.0.1"
  timeout 120 $M/hg_perf_server -c ofi -p $p $H -b > srv.log 2>&1 &
  local sp=$!
  for i in $(seq 1 50); do [ -s port.cfg ] && break; sleep 0.1; done
  timeout 120 $M/hg_rate -c ofi -p $p $H -b -x $w -l $loops -y 8 -z 8 > $3 2>&1
  kill $sp 2>/dev/null; wait $sp 2>/dev/null
  cd /; rm -rf $d
}
for r in $(seq 1 $n); do
  for p in shm tcp; do
    for w in 1 16 64 256; do
      hg $p $w $out/hga-$p-w$w-$r.txt
      timeout 300 $B/tools/fabrpc-bench rate --provider $p --coalesce off --progress busy \
        --inflight $w --baseline --json > $out/fabrpc-$p-w$w-$r.jsonl 2> $out/fabrpc-$p-w$w-$r.err
      hg $p $w $out/hgb-$p-w$w-$r.txt
    done
  done
done
