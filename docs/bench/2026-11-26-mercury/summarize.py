import json,glob,sys,statistics,re
d=sys.argv[1]; tol=float(sys.argv[2]) if len(sys.argv)>2 else 0.15
def hgval(f):
    try:
        last=[l for l in open(f) if l.strip() and not l.startswith('#')]
        return float(last[-1].split()[1])
    except Exception: return None
for p in ('shm','tcp'):
  print(p)
  for w in (1,16,64,256):
    R=[]
    for f in sorted(glob.glob(f'{d}/fabrpc-{p}-w{w}-*.jsonl')):
        r=re.search(r'-(\d+)\.jsonl',f).group(1)
        fr=raw=None
        for l in open(f):
            j=json.loads(l)
            if j['system']=='fabrpc': fr=j['calls_per_s']
            if j['system']=='fi_msg': raw=j['calls_per_s']
        a=hgval(f'{d}/hga-{p}-w{w}-{r}.txt'); b=hgval(f'{d}/hgb-{p}-w{w}-{r}.txt')
        if None in (fr,raw,a,b): continue
        stable=abs(a-b)/max(a,b)<=tol
        R.append((r,fr,raw,a,b,stable))
    st=[x for x in R if x[5]]
    rat=[x[1]/((x[3]+x[4])/2) for x in st]
    print(f" W={w:3} rounds {len(R)} stable {len(st)}: fabrpc/hg {' '.join(f'{x:.2f}' for x in rat)} median {statistics.median(rat) if rat else float('nan'):.2f}; "
          f"fabrpc/raw {' '.join(f'{x[1]/x[2]:.2f}' for x in st)}; raw k {' '.join(f'{x[2]/1e3:.0f}' for x in st)}; fabrpc k {' '.join(f'{x[1]/1e3:.0f}' for x in st)}; hg k {' '.join(f'{(x[3]+x[4])/2e3:.0f}' for x in st)}")
