#!/usr/bin/env python3
"""run.sh's rows by build (old, new), row kind and the machine's state
(the cache line's round trip before and after the row: < 300 ns near,
>= 300 far, else changed). usage: summarize.py OUTDIR"""
import collections, glob, json, os, statistics, sys

def state(r):
    a, b = r.get('core_ns_before'), r.get('core_ns_after')
    if a is None or b is None:
        return 'unknown'
    if a < 300 and b < 300:
        return 'near'
    if a >= 300 and b >= 300:
        return 'far'
    return 'changed'

g = collections.defaultdict(list)
for f in glob.glob(os.path.join(sys.argv[1], '*.jsonl')):
    v = os.path.basename(f).split('.')[0]
    for line in open(f):
        if not line.startswith('{'):
            continue
        r = json.loads(line)
        if r['system'] != 'fabrpc':
            continue
        if r['metric'] == 'latency':
            k, x = 'call %d B round trip, p50 us' % r['size'], r['p50_us']
        else:
            k, x = 'copied %d B calls, MB/s' % r['size'], r['mb_per_s']
        g[(k, state(r), v)].append(x)
print('| row | state | old: rows, median (min-max) | new: rows, median (min-max) |')
print('|---|---|---|---|')
def cell(x):
    if not x:
        return '-'
    return '%d, %.1f (%.1f-%.1f)' % (len(x), statistics.median(x), min(x), max(x))
for k, st in sorted({(k, s) for k, s, _ in g}):
    print('| %s | %s | %s | %s |' % (k, st, cell(g[(k, st, 'old')]), cell(g[(k, st, 'new')])))
