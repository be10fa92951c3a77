#!/bin/bash
# Helpers for ranks started by hand (no fabrpc-run); source after lib.sh.
#
#   free_port              prints a TCP port on 127.0.0.1 that nothing
#                          listens on now (a store address)
#   wait_bounded SECS PID  waits for PID, a child of this shell, at most
#                          SECS seconds, SIGKILLs it past that; returns its
#                          status (124 when it had to be killed)
#   on_host NS CMD...      runs CMD as on another host: in network
#                          namespace NS and a pid namespace of its own, so
#                          that ranks do not see each other's processes
#                          (a rank watches the pids of ranks on its host:
#                          one that saw its peer's process end called it
#                          dead, not unreachable, run_host_vanish in CI)
#   need_on_host           skips the test where on_host cannot work
#
# Start each rank itself in the background (not under timeout) and write
# its pid to a $TMPD/*.pid file, so that make_tmpdir's cleanup ends it.

# The port is taken below the kernel's ephemeral range, where other tests'
# connections take their local ports, and checked by binding it.
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

wait_bounded() {
    local secs=$1 pid=$2 n=0
    while pid_alive "$pid"; do
        if [ $n -ge $((secs * 10)) ]; then
            kill -KILL "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            return 124
        fi
        sleep 0.1
        n=$((n + 1))
    done
    wait "$pid"
}

on_host() {
    local ns=$1
    shift
    ip netns exec "$ns" unshare --pid --fork --kill-child "$@"
}

need_on_host() {
    command -v ip >/dev/null || skip "no ip(8)"
    command -v unshare >/dev/null || skip "no unshare(1)"
    unshare --pid --fork --kill-child true 2>/dev/null ||
        skip "cannot make pid namespaces (not root?)"
}
