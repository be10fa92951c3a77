# gdb python script for fabrpc-stress's watchdog (ST_GDB=1 ST_GDB_X=tools/stress_state.py):
# send slots per destination (posted_to = rank + 1; 0 free; 4294967295 orphan),
# the receive buffer count, and handle_message frames (receive buffers held) per thread.
import gdb
from collections import Counter
try:
    f = gdb.parse_and_eval("A->fab").dereference()
    n = int(f["nslots"]); c = Counter()
    for i in range(n):
        s = f["all_slots"][i].dereference()
        c[int(s["posted_to"])] += 1
    print("SLOTS nslots=%d orphaned=%d posted_to=%s" % (n, int(f["slots_orphaned"]), dict(c)))
    print("RECV_COUNT", int(f["opts"]["recv_count"]), "eager_max", int(f["opts"]["eager_max"]))
except Exception as e:
    print("ERR", e)
hm = Counter(); depth = Counter()
for inf in gdb.inferiors():
    for t in inf.threads():
        t.switch()
        fr = gdb.newest_frame(); k = 0; h = 0
        while fr is not None:
            if fr.name() == "handle_message": h += 1
            k += 1
            fr = fr.older()
        hm[t.num] = h; depth[t.num] = k
print("HANDLE_MESSAGE frames per thread", {k:v for k,v in hm.items() if v}, "total", sum(hm.values()))
print("STACK depth", dict(depth))
