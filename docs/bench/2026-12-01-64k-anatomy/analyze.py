import struct, sys, glob, statistics
from collections import Counter
GHZ=float(sys.argv[1])
files=sorted(glob.glob('/tmp/trace/out.*'))
recs=[]
for fi,fn in enumerate(files):
    data=open(fn,'rb').read()
    for t,i,tid in struct.iter_unpack('QII',data):
        recs.append((t,fi,i))
cnt=Counter((r[1],r[2]) for r in recs)
caller=max(range(len(files)), key=lambda fi: cnt.get((fi,1),0))
recs.sort()
names={1:'call_in',7:'call_out',2:'inj_pre',3:'inj_post',30:'frame',50:'rsend',51:'rsend_blk',52:'on_desc',53:'pre_read',54:'post_read',55:'on_read',56:'finish',57:'done_sent',58:'delivered',59:'on_done',33:'handler',34:'respond',35:'handler_ret'}
seqs=[]; cur=None
for t,fi,i in recs:
    side='A' if fi==caller else 'B'
    if side=='A' and i==1:
        cur=[(t,'A.call_in')]; seqs.append(cur); continue
    if cur is None or i not in names: continue
    cur.append((t,side+'.'+names[i]))
pat=Counter(tuple(n for _,n in s) for s in seqs)
top,c=pat.most_common(1)[0]
print('calls',len(seqs),'top pattern share %.2f'%(c/len(seqs)))
for k in range(len(top)-1): pass
ds=[[] for _ in range(len(top)-1)]; tot=[]
for s in seqs[1000:]:
    if tuple(n for _,n in s)!=top: continue
    for k in range(len(top)-1): ds[k].append((s[k+1][0]-s[k][0])/GHZ)
    tot.append((s[-1][0]-s[0][0])/GHZ)
for k in range(len(top)-1):
    print('%-16s -> %-16s p50 %7.0f ns'%(top[k],top[k+1],statistics.median(ds[k])))
print('total p50 %.0f ns'%statistics.median(tot))
