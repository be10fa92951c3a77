/* See fi_load.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dlvsym, dladdr */
#endif
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>

/* The forwarders below define libfabric's names in this library: hidden,
 * so that they are neither exported from libfabrpc.so nor seen by
 * libfabric's own calls in a program that links both. The system headers
 * <rdma/fabric.h> includes come first, outside the pragma: libc's
 * functions must stay default (an external call). */
#pragma GCC visibility push(hidden)
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#pragma GCC visibility pop

#include "comm/fi_load.h"
#include "comm/threads.h"

/* Each entry point (fi_<name>) at the symbol version a link against
 * libfabric 1.17's headers binds (objdump -T of a program linked so);
 * dlsym's default version where the library has no such version. */
#define ENTRY_POINTS(X)                                                    \
    X(getinfo, "FABRIC_1.3")                                               \
    X(freeinfo, "FABRIC_1.3")                                              \
    X(dupinfo, "FABRIC_1.3")                                               \
    X(fabric, "FABRIC_1.1")                                                \
    X(strerror, "FABRIC_1.0")                                              \
    X(version, "FABRIC_1.0")

#define FIELD(name, version) __typeof__(fi_##name) *name;
static struct {
    ENTRY_POINTS(FIELD)
} fn;
#undef FIELD

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded;
static char why_not[512];

static const int taken[] = FR_INFINIPATH_SIGNALS;
#define NTAKEN (sizeof(taken) / sizeof(taken[0]))

int fr_fi_taken_by_infinipath(const struct sigaction *sa)
{
    void *f = (sa->sa_flags & SA_SIGINFO) ? (void *)sa->sa_sigaction
                                          : (void *)sa->sa_handler;
    Dl_info info;
    if (sa->sa_handler == SIG_DFL || sa->sa_handler == SIG_IGN)
        return 0;
    return dladdr(f, &info) && info.dli_fname &&
           strstr(info.dli_fname, "libinfinipath") != NULL;
}

static void *entry(void *lib, const char *name, const char *version)
{
    void *p = dlvsym(lib, name, version);
    return p ? p : dlsym(lib, name);
}

/* Between libinfinipath's constructor and the handlers' return, a
 * signal sent to this thread would run libinfinipath's handler (exit(1)):
 * asynchronous signals are held off on this thread meanwhile, and arrive
 * once the program's handlers are back. At the library's load (below) the
 * thread is most often the program's only one, so none can reach another
 * thread then. */
static void load(void)
{
    sigset_t hold, old;
    fr_async_signals(&hold);
    int masked = pthread_sigmask(SIG_BLOCK, &hold, &old) == 0;
    struct sigaction before[NTAKEN];
    int have[NTAKEN];
    for (size_t i = 0; i < NTAKEN; i++)
        have[i] = sigaction(taken[i], NULL, &before[i]) == 0;
    void *lib = dlopen(FR_LIBFABRIC_SONAME, RTLD_NOW | RTLD_LOCAL);
    for (size_t i = 0; i < NTAKEN; i++) {
        struct sigaction now;
        if (have[i] && sigaction(taken[i], NULL, &now) == 0 &&
            fr_fi_taken_by_infinipath(&now))
            sigaction(taken[i], &before[i], NULL);
    }
    if (masked)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(why_not, sizeof(why_not), "%s", e ? e : "dlopen failed");
        return;
    }
#define RESOLVE(name, version)                                             \
    if (!(*(void **)&fn.name = entry(lib, "fi_" #name, version))) {        \
        snprintf(why_not, sizeof(why_not), "%s has no fi_%s",              \
                 FR_LIBFABRIC_SONAME, #name);                              \
        return;                                                            \
    }
    ENTRY_POINTS(RESOLVE)
#undef RESOLVE
    loaded = 1; /* never unloaded: its providers live as long as we do */
}

int fr_fi_load(const char **why)
{
    pthread_once(&once, load);
    if (why)
        *why = loaded ? NULL : why_not;
    return loaded ? 0 : -1;
}

/* Loaded with libfabrpc, as a link would: before main in a program linked
 * with it, when it is loaded otherwise (dlopen). A failure is told by the
 * first frpc_init. */
__attribute__((constructor)) static void load_with_library(void)
{
    fr_fi_load(NULL);
}

/* ---- the forwarders --------------------------------------------------- */

int fi_getinfo(uint32_t version, const char *node, const char *service,
               uint64_t flags, const struct fi_info *hints,
               struct fi_info **info)
{
    if (fr_fi_load(NULL))
        return -FI_ENOSYS;
    return fn.getinfo(version, node, service, flags, hints, info);
}

void fi_freeinfo(struct fi_info *info)
{
    if (info && fr_fi_load(NULL) == 0)
        fn.freeinfo(info);
}

struct fi_info *fi_dupinfo(const struct fi_info *info)
{
    return fr_fi_load(NULL) ? NULL : fn.dupinfo(info);
}

int fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
              void *context)
{
    if (fr_fi_load(NULL))
        return -FI_ENOSYS;
    return fn.fabric(attr, fabric, context);
}

const char *fi_strerror(int errnum)
{
    if (fr_fi_load(NULL))
        return "libfabric could not be loaded";
    return fn.strerror(errnum);
}

uint32_t fi_version(void)
{
    return fr_fi_load(NULL) ? 0 : fn.version();
}
