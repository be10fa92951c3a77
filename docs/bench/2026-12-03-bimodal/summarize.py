#!/usr/bin/env python3
"""Groups run.sh's rows by the machine's state around each: a cache
line's round trip between the two CPUs just before and just after the row
(core_ns_before, core_ns_after). A row whose two figures fall in one
class is counted there; else it is "changed". usage: summarize.py OUT_DIR"""
import glob, json, os, statistics, sys

CLASSES = [('<80 ns', 0, 80), ('80-300 ns', 80, 300), ('>=300 ns', 300, 1e9)]

def cls(ns):
    for name, lo, hi in CLASSES:
        if lo <= ns < hi:
            return name
    return None

def kind(r):
    k = '%s %s %s %s' % (r['system'], r['provider'], r['metric'], r['size'])
    if r.get('lent') is not None:
        k += ' lent' if r['lent'] else ' copied'
    if r['metric'] == 'rate':
        k += ' W%s' % r['inflight']
    return k

def figure(r):
    if r['metric'] == 'latency' or (r['metric'] in ('get', 'put') and r['size'] <= 64):
        return r['p50_us'], 'p50 us'
    if r['metric'] == 'rate':
        return r['calls_per_s'] / 1e3, 'k calls/s'
    return r['mb_per_s'], 'MB/s'

groups, order = {}, []
for f in sorted(glob.glob(os.path.join(sys.argv[1], 'round-*.jsonl'))):
    for line in open(f):
        if not line.startswith('{'):
            continue
        r = json.loads(line)
        if 'core_ns_before' not in r:
            continue
        a, b = cls(r['core_ns_before']), cls(r['core_ns_after'])
        st = a if a == b else 'changed'
        v, unit = figure(r)
        key = (kind(r), unit)
        if key not in groups:
            groups[key] = {}
            order.append(key)
        groups[key].setdefault(st, []).append(v)

def cell(vs):
    if not vs:
        return '-'
    fmt = '%.2f' if max(vs) < 100 else '%.0f'
    return ('%d rows: ' + fmt + ' (' + fmt + '-' + fmt + ')') % (
        len(vs), statistics.median(vs), min(vs), max(vs))

names = [c[0] for c in CLASSES] + ['changed']
print('| row | unit | ' + ' | '.join('state ' + n for n in names) + ' |')
print('|---' * (len(names) + 2) + '|')
for key in order:
    g = groups[key]
    print('| %s | %s | %s |' % (key[0], key[1], ' | '.join(cell(g.get(n, [])) for n in names)))
print('\ncells: rows in that state, median (min-max)')
