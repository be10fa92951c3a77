#!/bin/bash
# A program that loads libfabrpc with dlopen after it set its own signal
# handlers (an interpreter's extension module) keeps them: libfabrpc loads
# libfabric, and with it libinfinipath, which takes SIGINT, SIGTERM,
# SIGABRT, SIGSEGV, SIGILL and SIGBUS, and puts back what that load
# replaced (comm/fi_load.c). In C (dlopen_signals.c), and from Python's
# ctypes, where Ctrl-C must still raise KeyboardInterrupt (those two
# only where the build has a shared library: not --disable-shared, the
# sanitizer builds). And a libfabric.so.1 that is not libfabric makes
# frpc_init fail with a clear message, where it used to be a link error.
. "$(dirname "$0")/lib.sh"
need_var top_builddir DLOPEN_SIGNALS FABRPC_RUN HELLO
make_tmpdir
export FABRPC_PROVIDERS=shm

not_libfabric() {
    command -v cc >/dev/null || { echo "no cc: nothing to check"; return 0; }
    mkdir -p "$TMPD/fake" &&
        cc -shared -fPIC -o "$TMPD/fake/libfabric.so.1" -x c /dev/null ||
        return 1
    local st=0
    LD_LIBRARY_PATH="$TMPD/fake" run_bounded 60 "$FABRPC_RUN" -n 2 \
        --timeout 50 "$HELLO" >"$TMPD/fake.out" 2>&1 || st=$?
    cat "$TMPD/fake.out"
    [ $st = 1 ] || { echo "status $st, want 1"; return 1; }
    expect_grep 'frpc_init: backend not available: cannot load libfabric \(libfabric.so.1\): libfabric.so.1 has no fi_getinfo' "$TMPD/fake.out"
}
run_case "a libfabric.so.1 that is not libfabric: frpc_init fails FRPC_ENOBACKEND, saying so" not_libfabric

so=$top_builddir/rpc/.libs/libfabrpc.so.1
if [ ! -f "$so" ]; then
    echo "no shared libfabrpc in this build: the dlopen cases do not apply"
    finish_cases
fi

in_c() {
    run_bounded 60 "$DLOPEN_SIGNALS" "$so" >"$TMPD/c.out" 2>&1 ||
        { cat "$TMPD/c.out"; return 1; }
    expect_grep '^ok$' "$TMPD/c.out"
}
run_case "C: handlers set before dlopen of libfabrpc stay through frpc_init and frpc_shutdown" in_c

in_python() {
    command -v python3 >/dev/null || { echo "no python3: nothing to check"; return 0; }
    cat >"$TMPD/ctypes_sigint.py" <<'PY'
import ctypes, os, signal, sys, time
lib = ctypes.CDLL(sys.argv[1])
def interrupted(when):
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)
    except KeyboardInterrupt:
        print(when + ": KeyboardInterrupt")
        return
    print(when + ": no KeyboardInterrupt")
interrupted("after the load")
agent = ctypes.c_void_p()
cfg = None
rc = lib.frpc_init(cfg, ctypes.byref(agent))
print("frpc_init", rc)
interrupted("after frpc_init")
lib.frpc_shutdown.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
print("frpc_shutdown", lib.frpc_shutdown(agent, 0, 10000))
PY
    FABRPC_RANK=0 FABRPC_WORLD_SIZE=1 run_bounded 60 python3 \
        "$TMPD/ctypes_sigint.py" "$so" >"$TMPD/py.out" 2>&1 ||
        { cat "$TMPD/py.out"; return 1; }
    cat "$TMPD/py.out"
    expect_grep '^after the load: KeyboardInterrupt$' "$TMPD/py.out"
    expect_grep '^frpc_init 0$' "$TMPD/py.out"
    expect_grep '^after frpc_init: KeyboardInterrupt$' "$TMPD/py.out"
    expect_grep '^frpc_shutdown 0$' "$TMPD/py.out"
}
run_case "Python ctypes: Ctrl-C still raises KeyboardInterrupt after loading libfabrpc and frpc_init" in_python
finish_cases
