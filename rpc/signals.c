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
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include "config.h"

#include <dlfcn.h>
#include <signal.h>
#include <string.h>

#include "rpc/agent.h"

static int installed_by_infinipath(const struct sigaction *sa)
{
    void *fn = (sa->sa_flags & SA_SIGINFO) ? (void *)sa->sa_sigaction
                                           : (void *)sa->sa_handler;
    Dl_info info;
    if (sa->sa_handler == SIG_DFL || sa->sa_handler == SIG_IGN)
        return 0;
    return dladdr(fn, &info) && info.dli_fname &&
           strstr(info.dli_fname, "libinfinipath");
}

void fr_signals_default(void)
{
    static const int taken[] = {SIGINT,  SIGTERM, SIGABRT,
                                SIGSEGV, SIGILL,  SIGBUS};
    for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++) {
        struct sigaction now, dfl;
        if (sigaction(taken[i], NULL, &now) != 0 ||
            !installed_by_infinipath(&now))
            continue;
        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(taken[i], &dfl, NULL);
    }
}

/* At load, before main (libinfinipath's constructor ran first: it is a
 * dependency), so the program's own handlers, installed later, win.
 * frpc_init calls fr_signals_default too, which also makes a static link
 * take this object, and with it this constructor. */
__attribute__((constructor)) static void signals_at_load(void)
{
    fr_signals_default();
}
