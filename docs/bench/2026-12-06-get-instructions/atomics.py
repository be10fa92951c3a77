#!/usr/bin/env python3
"""Locked instructions an operation executes, from a callgrind profile.

usage: atomics.py CALLGRIND_OUT CALLS

The profile must be taken with --dump-instr=yes (run.sh does). Each
executed instruction's count is matched against its object's disassembly
(objdump -d): a lock-prefixed instruction or an xchg with memory (locked
without a prefix) is an atomic read-modify-write, which on x86 costs
about 20 cycles uncontended and orders memory: a cost an instruction
count does not show. Prints the atomics per operation (the total divided
by CALLS) and where they are, by object and function.
"""
import collections
import re
import subprocess
import sys


def parse(path):
    """{object: {address: executions}} from a callgrind file."""
    names = {}  # "(n)" -> object name
    counts = collections.defaultdict(collections.Counter)
    ob = None
    last = 0
    skip_next = False
    with open(path) as fh:
        for line in fh:
            line = line.rstrip("\n")
            m = re.match(r"(c?)ob=\((\d+)\)(?: (.*))?", line)
            if m:  # names are shared by ob= and cob= lines
                if m.group(3):
                    names[m.group(2)] = m.group(3)
                if not m.group(1):
                    ob = names[m.group(2)]
                continue
            if line.startswith("calls="):
                skip_next = True
                continue
            if not line or not (line[0] in "+-*0" or line[0].isdigit()):
                continue
            fields = line.split()
            pos = fields[0]
            if pos == "*":
                addr = last
            elif pos[0] in "+-":
                addr = last + int(pos, 16) if pos[1:2] == "0x" else last + int(pos)
            else:
                addr = int(pos, 16)
            last = addr
            if skip_next:
                skip_next = False
                continue
            if len(fields) >= 3:
                counts[ob][addr] += int(fields[2])
    return counts


LOCKED = re.compile(r"\block\b|\bxchg\S*\s+[^,]*\(|\bxchg\S*\s+%\w+,[^,]*\(")


def locked_sites(obj):
    """{address: (function, instruction)} of obj's locked instructions."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj],
                         capture_output=True, text=True).stdout
    sites, fn = {}, "?"
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:", line)
        if m:
            fn = m.group(1)
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(.*)", line)
        if m and LOCKED.search(m.group(2)):
            sites[int(m.group(1), 16)] = (fn, m.group(2).strip())
    return sites


def main():
    counts = parse(sys.argv[1])
    calls = int(sys.argv[2])
    total = 0
    where = collections.Counter()
    for ob, addrs in counts.items():
        if ob.startswith("???") or not ob.startswith("/"):
            continue
        sites = locked_sites(ob)
        for addr, n in addrs.items():
            if addr in sites:
                total += n
                short = ob.rsplit("/", 1)[-1]
                where[f"{short}: {sites[addr][0]}"] += n
    print(f"atomic read-modify-writes: {total / calls:.1f} an operation")
    for k, n in where.most_common():
        if n / calls >= 0.05:
            print(f"  {n / calls:5.2f}  {k}")


if __name__ == "__main__":
    main()
