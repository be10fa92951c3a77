/*
 * A program that sets its own handlers for the signals libinfinipath takes
 * (SIGINT, SIGTERM, SIGABRT, SIGSEGV, SIGILL, SIGBUS), then loads
 * libfabrpc with dlopen, as an interpreter loads an extension module, and
 * runs an agent of one rank: its handlers must still be its own after the
 * load; after frpc_init (which loads libfabric, and with it libinfinipath)
 * and after frpc_shutdown none may be libinfinipath's, and a raised SIGINT
 * and SIGTERM must each reach the program's handler once. (libfabric's
 * shm provider puts a handler of its own in front for SIGINT, SIGTERM,
 * SIGSEGV and SIGBUS: it removes its shared-memory files, puts the one
 * it found back and raises the signal again.) Links nothing of fabrpc's
 * or libfabric's.
 *
 * usage: dlopen_signals PATH/libfabrpc.so.1
 * Prints "ok" and exits 0, or says what differed and exits 1.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabrpc.h"

static const int sigs[] = {SIGINT, SIGTERM, SIGABRT, SIGSEGV, SIGILL, SIGBUS};
#define NSIGS (sizeof(sigs) / sizeof(sigs[0]))

static volatile sig_atomic_t caught;

static void mine(int sig)
{
    (void)sig;
    caught++;
}

static int in_infinipath(void *fn)
{
    Dl_info info;
    return dladdr(fn, &info) && info.dli_fname &&
           strstr(info.dli_fname, "libinfinipath");
}

/* 0 if every signal's handler is mine (strict) or at least not
 * libinfinipath's, else 1 (said on stderr). */
static int check_handlers(const char *when, int strict)
{
    int bad = 0;
    for (size_t i = 0; i < NSIGS; i++) {
        struct sigaction sa;
        if (sigaction(sigs[i], NULL, &sa) != 0 ||
            (strict ? sa.sa_handler != mine
                    : in_infinipath((void *)sa.sa_handler))) {
            Dl_info info;
            const char *where = "?";
            if (sa.sa_handler == SIG_DFL)
                where = "the default";
            else if (sa.sa_handler == SIG_IGN)
                where = "ignored";
            else if (dladdr((void *)sa.sa_handler, &info) && info.dli_fname)
                where = info.dli_fname;
            fprintf(stderr, "%s: signal %d (%s): handler is %s%s\n", when,
                    sigs[i], strsignal(sigs[i]), where,
                    strict ? ", not the program's" : "");
            bad = 1;
        }
    }
    return bad;
}

#define SYM(type, name)                                                    \
    type name##_p = (type)dlsym(lib, #name);                               \
    if (!name##_p) {                                                       \
        fprintf(stderr, "dlsym %s: %s\n", #name, dlerror());               \
        return 1;                                                          \
    }

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH/libfabrpc.so.1\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < NSIGS; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = mine;
        sigemptyset(&sa.sa_mask);
        if (sigaction(sigs[i], &sa, NULL) != 0) {
            perror("sigaction");
            return 1;
        }
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    int bad = check_handlers("after dlopen of libfabrpc", 1);

    SYM(__typeof__(&frpc_config_init_sized), frpc_config_init_sized)
    SYM(__typeof__(&frpc_init), frpc_init)
    SYM(__typeof__(&frpc_shutdown), frpc_shutdown)
    SYM(__typeof__(&frpc_strerror), frpc_strerror)
    frpc_config cfg;
    char err[512] = "";
    frpc_config_init_sized_p(&cfg, sizeof(cfg));
    cfg.rank = 0;
    cfg.world_size = 1;
    cfg.errbuf = err;
    cfg.errbuf_len = sizeof(err);
    frpc_agent *agent = NULL;
    int rc = frpc_init_p(&cfg, &agent);
    if (rc) {
        fprintf(stderr, "frpc_init: %s: %s\n", frpc_strerror_p(rc), err);
        return 1;
    }
    bad |= check_handlers("after frpc_init", 0);
    raise(SIGINT);
    raise(SIGTERM);
    if (caught != 2) {
        fprintf(stderr, "a raised SIGINT and SIGTERM reached the program's "
                "handler %d times, not twice\n", (int)caught);
        bad = 1;
    }
    rc = frpc_shutdown_p(agent, FRPC_SHUTDOWN_GRACEFUL, 10000);
    if (rc) {
        fprintf(stderr, "frpc_shutdown: %s\n", frpc_strerror_p(rc));
        bad = 1;
    }
    bad |= check_handlers("after frpc_shutdown", 0);
    if (!bad)
        printf("ok\n");
    return bad;
}
