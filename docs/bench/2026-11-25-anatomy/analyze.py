import struct, sys, glob, statistics
GHZ=float(sys.argv[1])
files=sorted(glob.glob('/tmp/trace/out.*'))
recs=[]
for fi,fn in enumerate(files):
    data=open(fn,'rb').read()
    for t,i,tid in struct.iter_unpack('QII',data):
        recs.append((t,fi,i))
caller=[fi for fi in range(len(files)) if any(r[1]==fi and r[2]==1 for r in recs[:100000])][0]
recs.sort()
# walk: sequence of labelled events per call
names={1:'call_in',2:'inj_pre',3:'inj_post',4:'cq_got',5:'on_msg',6:'complete',7:'call_out',10:'ans_stored',11:'readcq_ret',13:'cmpl_many_in',15:'spin_ret',16:'wait_ret',20:'checked',21:'pend_added',22:'frame_in',23:'encoded',30:'hdr_ok',31:'decoded',32:'onreq',33:'handler',34:'respond',35:'handler_ret'}
seqs=[]; cur=None
for t,fi,i in recs:
    if i==40: continue
    side='A' if fi==caller else 'B'
    if side=='A' and i==1:
        cur=[(t,'A.call_in')]; seqs.append(cur); continue
    if cur is None: continue
    cur.append((t,side+'.'+names[i]))
# take the most common pattern
from collections import Counter
pat=Counter(tuple(n for _,n in s) for s in seqs)
top,cnt=pat.most_common(1)[0]
print('calls',len(seqs),'top pattern share',cnt/len(seqs))
for p,c in pat.most_common(4): print(c, ' > '.join(p))
ds=[[] for _ in range(len(top)-1)]; tot=[]
for s in seqs[1000:]:
    if tuple(n for _,n in s)!=top: continue
    for k in range(len(top)-1): ds[k].append((s[k+1][0]-s[k][0])/GHZ)
    tot.append((s[-1][0]-s[0][0])/GHZ)
for k in range(len(top)-1):
    print('%-14s -> %-14s p50 %7.0f ns  mean %7.0f'%(top[k],top[k+1],statistics.median(ds[k]),statistics.mean(ds[k])))
print('total p50 %.0f ns'%statistics.median(tot))
