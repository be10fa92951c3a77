#!/bin/bash
# Usage: run.sh SRC BUILD [N...]: builds store_fanout.c against the
# source tree SRC and its build tree BUILD (comm/ built), runs it per N,
# leaves one after another; TOGETHER=1 in the environment: all at once.
set -eu
src=$(cd "$1" && pwd); build=$(cd "$2" && pwd); shift 2
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
gcc -O2 -I"$src" -I"$build" -o "$out/store_fanout" "$here/store_fanout.c" \
    "$build/comm/.libs/libfrcomm.a" -lpthread -lrt
for n in "${@:-64 256 512}"; do
    timeout 600 "$out/store_fanout" "$n" ${TOGETHER:+together}
done
