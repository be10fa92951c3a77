/*
 * callcount: counts pthread_mutex_lock, malloc and calloc calls by call
 * site, to check what a fabrpc call costs (docs/bench/HISTORY.md, "The
 * fast path, counted"). Not built by make; a preload library for one run:
 *
 *   gcc -O2 -shared -fPIC -o /tmp/callcount.so tools/callcount.c -ldl
 *   LD_LIBRARY_PATH=$B/rpc/.libs LD_PRELOAD=/tmp/callcount.so \
 *       $B/tools/.libs/fabrpc-bench rate --provider shm --inflight 64
 *
 * Each process writes /tmp/callcount.PID at exit: one line per call site,
 * "KIND COUNT OBJECT OFFSET"; `addr2line -f -e OBJECT OFFSET` names it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SITES 4096
enum { K_LOCK = 1, K_MALLOC, K_CALLOC };

static void *site[SITES];
static atomic_ulong hits[SITES];
static atomic_int nsites;
static _Thread_local int inside; /* our own bookkeeping is not counted */

static int (*real_lock)(pthread_mutex_t *);
static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);

/* Sites are never removed, so a reader racing an append at worst adds a
 * second slot for the same site; dump() prints both and they sum. */
static void note(void *ra, unsigned long kind)
{
    void *key = (void *)((unsigned long)ra | (kind << 60));
    int n = atomic_load(&nsites);
    for (int i = 0; i < n && i < SITES; i++)
        if (site[i] == key) {
            atomic_fetch_add(&hits[i], 1);
            return;
        }
    int i = atomic_fetch_add(&nsites, 1);
    if (i < SITES) {
        site[i] = key;
        atomic_store(&hits[i], 1);
    }
}

#define COUNT(kind)                                         \
    do {                                                    \
        if (!inside) {                                      \
            inside = 1;                                     \
            note(__builtin_return_address(0), kind);        \
            inside = 0;                                     \
        }                                                   \
    } while (0)

int pthread_mutex_lock(pthread_mutex_t *m)
{
    if (!real_lock)
        real_lock = (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT,
                                                      "pthread_mutex_lock");
    COUNT(K_LOCK);
    return real_lock(m);
}

void *malloc(size_t n)
{
    if (!real_malloc)
        real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    COUNT(K_MALLOC);
    return real_malloc(n);
}

/* dlsym itself may calloc: that one call gets zeroed static memory. */
static char bootstrap[4096];
static int resolving;

void *calloc(size_t n, size_t size)
{
    if (!real_calloc) {
        if (resolving) {
            memset(bootstrap, 0, sizeof(bootstrap));
            return bootstrap;
        }
        resolving = 1;
        real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
        resolving = 0;
    }
    COUNT(K_CALLOC);
    return real_calloc(n, size);
}

__attribute__((destructor)) static void dump(void)
{
    static const char *kinds[] = {"?", "lock", "malloc", "calloc"};
    char path[64];
    inside = 1;
    snprintf(path, sizeof(path), "/tmp/callcount.%d", (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    int n = atomic_load(&nsites);
    for (int i = 0; i < n && i < SITES; i++) {
        unsigned long k = (unsigned long)site[i];
        void *ra = (void *)(k & ((1ul << 60) - 1));
        Dl_info di;
        const char *obj = "?";
        unsigned long off = 0;
        if (dladdr(ra, &di) && di.dli_fname) {
            obj = di.dli_fname;
            off = (unsigned long)ra - (unsigned long)di.dli_fbase;
        }
        fprintf(f, "%s %lu %s 0x%lx\n", kinds[k >> 60],
                (unsigned long)atomic_load(&hits[i]), obj, off);
    }
    fclose(f);
}
