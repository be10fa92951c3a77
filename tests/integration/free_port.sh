#!/bin/bash
# free_port: prints a TCP port on 127.0.0.1 that nothing listens on now,
# for ranks started by hand (they need a store address). It is taken
# below the kernel's ephemeral range, where other tests' connections take
# their local ports, and checked by binding it. Source this file.
free_port() {
    python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 12000))
import random, socket
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
lo = lo if lo > 21000 else 32768
for _ in range(100):
    p = random.randrange(20000, lo)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    print(p)
    break
else:
    raise SystemExit(1)
PY
}
