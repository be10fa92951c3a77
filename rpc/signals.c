/*
 * Fatal and stop signals back to their defaults where a library under
 * libfabric took them.
 *
 * Debian's libfabric links libpsm_infinipath, whose libinfinipath.so.4
 * installs, from its constructor, handlers for SIGINT, SIGTERM, SIGABRT,
 * SIGSEGV, SIGILL and SIGBUS in every program that loads libfabric
 * (unless IPATH_NO_BACKTRACE is set). Each writes a "*.btr" backtrace
 * file into the working directory and calls exit(1). So a rank that
 * aborts or is stopped seemed to exit with status 1, not by its signal
 * (fabrpc-run and batch systems report a signal as 128+SIG), and a
 * SIGTERM that landed while fi_getinfo held libfabric's lock deadlocked
 * the process in libfabric's destructor: it never ended without SIGKILL,
 * and mpirun or torchrun send none. fabrpc installs no handler of its
 * own; it only undoes that one, leaving any other (the program's) alone.
 * libfabrpc loads libfabric itself and puts back what the load replaced
 * (comm/fi_load.c); this is for a program that links libfabric too, which
 * loaded it before main.
 */
#include "config.h"

#include <signal.h>
#include <string.h>

#include "comm/fi_load.h"
#include "rpc/agent.h"

void fr_signals_default(void)
{
    static const int taken[] = FR_INFINIPATH_SIGNALS;
    for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++) {
        struct sigaction now, dfl;
        if (sigaction(taken[i], NULL, &now) != 0 ||
            !fr_fi_taken_by_infinipath(&now))
            continue;
        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(taken[i], &dfl, NULL);
    }
}

/* At load, before main (in a program that links libfabric itself,
 * libinfinipath's constructor ran first), so the program's own handlers,
 * installed later, win.
 * frpc_init calls fr_signals_default too, which also makes a static link
 * take this object, and with it this constructor. */
__attribute__((constructor)) static void signals_at_load(void)
{
    fr_signals_default();
}
