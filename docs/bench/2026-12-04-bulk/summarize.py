#!/usr/bin/env python3
"""Ratios of fabrpc's get and put to raw fi_read / fi_write of the same run.
usage: summarize.py DIR PREFIX RUNS   (files DIR/PREFIX-N.jsonl)"""
import json, statistics as st, sys

d, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
acc = {}
for r in range(1, n + 1):
    rows = [json.loads(l[l.index('{'):]) for l in open(f'{d}/{prefix}-{r}.jsonl')
            if '{' in l]
    x = {(q['system'], q['metric'], q['size']): q['mb_per_s'] for q in rows}
    line = []
    for sz in (16 << 20, 256 << 20):
        for m, raw in (('get', 'raw_read'), ('put', 'raw_write')):
            a, b = x.get(('fabrpc', m, sz)), x.get(('fi_rma', raw, sz))
            if a and b:
                acc.setdefault((m, sz), []).append(a / b)
                line.append('%s %d MiB %.0f/%.0f MB/s = %.2f' % (m, sz >> 20, a, b, a / b))
    print(prefix, r, '; '.join(line))
print(prefix, 'median:', '; '.join('%s %d MiB %.2f' % (m, sz >> 20, st.median(v))
                                   for (m, sz), v in sorted(acc.items())))
