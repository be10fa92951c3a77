#!/bin/bash
# One-sided bulk bandwidth, fabrpc against Mercury in the same rounds. Per
# round and provider: Mercury hg_bw_read and hg_bw_write (one handle, 4
# buffers of the size (its default, 64, is 16 GiB at 256 MiB), busy
# polling), fabrpc-bench rma (gets and puts, W 1, busy, with its raw
# libfabric fi_read/fi_write baseline and, on shm, memcpy), then Mercury
# again, so that a round whose two Mercury runs disagree (the machine
# changed state) can be set aside.
# usage: run.sh OUTDIR ROUNDS [FABRPC_BUILD_DIR] [MERCURY_BIN_DIR]
# Mercury 2.4.1 built as in ../2026-11-26-mercury/run.sh.
mkdir -p "$1"; out=$(cd "$1" && pwd); n=$2
B=${3:-_b}; M=${4:-/tmp/mercury/build/bin}; B=$(cd "$B" && pwd)
export FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo
SIZES="16777216 268435456"
hg() { # prov tag
  local p=$1 d s t; d=$(mktemp -d); cd $d
  local H=""; [ $p = tcp ] && H="-H 127.0.0.1"
  for t in read write; do
    for s in $SIZES; do
      local loops=$(( (4 << 30) / s )); [ $loops -lt 8 ] && loops=8
      rm -f port.cfg
      timeout 120 $M/hg_perf_server -c ofi -p $p $H -b > srv.log 2>&1 &
      local sp=$!
      for i in $(seq 1 50); do [ -s port.cfg ] && break; sleep 0.1; done
      echo "== $t $s" >> $out/$2
      timeout 120 $M/hg_bw_$t -c ofi -p $p $H -b -x 1 -w 4 -l $loops -y $s -z $s -M >> $out/$2 2>&1
      kill $sp 2>/dev/null; wait $sp 2>/dev/null
    done
  done
  cd /; rm -rf $d
}
for r in $(seq 1 $n); do
  for p in shm tcp; do
    hg $p hga-$p-$r.txt
    timeout 600 $B/tools/fabrpc-bench rma --provider $p --sizes 16m,256m \
      --inflight 1 --progress busy --baseline --json \
      > $out/fabrpc-$p-$r.jsonl 2> $out/fabrpc-$p-$r.err
    hg $p hgb-$p-$r.txt
  done
done
