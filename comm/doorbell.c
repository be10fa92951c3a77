/*
 * Doorbells over futexes in POSIX shared memory. See doorbell.h.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "comm/doorbell.h"
#include "comm/exit_unlink.h"
#include "comm/threads.h"

typedef struct bell {
    atomic_uint seq;      /* the futex word: bumped by every ring */
    atomic_uint sleeping; /* threads of the owner (about to be) asleep */
    atomic_uint ended;    /* fr_doorbell_end */
    /* fr_doorbell_loan_open's tags; 0: a free slot. Only the owner's
     * threads write them (compare-and-swap), peers read. A line of their
     * own: seq is written by every ring. */
    _Alignas(64) _Atomic uint64_t loan[FR_DOORBELL_LOANS];
} bell;

struct fr_doorbell {
    char base[96];
    uint32_t rank, world;
    int linked;
    fr_exit_name *exit_name; /* our name, removed at exit if still there */
    bell *mine;
    /* world entries, NULL until connected: written by the thread that
     * connects, read by every sender */
    _Atomic(bell *) *peer;
    /* where fr_doorbell_loan_open looks first: past the slot it took
     * last, so that a full table's scan is not the common case */
    atomic_uint loan_next;
};

void fr_doorbell_name(const char *base, uint32_t rank, char *buf,
                      size_t len)
{
    snprintf(buf, len, "/%s_bell_%u", base, rank);
}

static bell *map_bell(int fd)
{
    void *m = mmap(NULL, sizeof(bell), PROT_READ | PROT_WRITE, MAP_SHARED,
                   fd, 0);
    return m == MAP_FAILED ? NULL : m;
}

int fr_doorbell_open(const char *base, uint32_t rank, uint32_t world,
                     fr_doorbell **out, char *errbuf, size_t errlen)
{
    char name[128];
    fr_doorbell *d = calloc(1, sizeof(*d));
    int fd;

    if (!d || !(d->peer = calloc(world, sizeof(*d->peer)))) {
        free(d);
        return FRPC_ENOMEM;
    }
    snprintf(d->base, sizeof(d->base), "%s", base);
    d->rank = rank;
    d->world = world;
    fr_doorbell_name(d->base, rank, name, sizeof(name));
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, sizeof(bell)) != 0 ||
        !(d->mine = map_bell(fd))) {
        if (errbuf && errlen)
            snprintf(errbuf, errlen, "doorbell %s: %s", name,
                     strerror(errno));
        if (fd >= 0) {
            close(fd);
            shm_unlink(name);
        }
        free(d->peer);
        free(d);
        return FRPC_ETRANSPORT;
    }
    close(fd);
    d->linked = 1;
    d->exit_name = fr_exit_unlink_add(name);
    atomic_store(&d->peer[rank], d->mine);
    *out = d;
    return 0;
}

int fr_doorbell_connect(fr_doorbell *d, uint32_t peer)
{
    char name[128];
    int fd;
    if (!d || peer >= d->world)
        return FRPC_EINVAL;
    if (atomic_load(&d->peer[peer]))
        return 0;
    fr_doorbell_name(d->base, peer, name, sizeof(name));
    fd = shm_open(name, O_RDWR, 0);
    if (fd < 0)
        return FRPC_ETRANSPORT;
    bell *b = map_bell(fd);
    close(fd);
    atomic_store(&d->peer[peer], b);
    return b ? 0 : FRPC_ETRANSPORT;
}

void fr_doorbell_unlink(fr_doorbell *d)
{
    char name[128];
    if (!d || !d->linked)
        return;
    fr_doorbell_name(d->base, d->rank, name, sizeof(name));
    shm_unlink(name);
    fr_exit_unlink_drop(d->exit_name);
    d->exit_name = NULL;
    d->linked = 0;
}

void fr_doorbell_ring(fr_doorbell *d, uint32_t peer)
{
    bell *b;
    if (!d || peer >= d->world || !(b = atomic_load(&d->peer[peer])))
        return;
    if (!atomic_load(&b->sleeping))
        return;
    atomic_fetch_add(&b->seq, 1);
    if (syscall(SYS_futex, &b->seq, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0) >
        0)
        fr_woke_sleeper = 1;
}

void fr_doorbell_sleep(fr_doorbell *d, unsigned timeout_us,
                       int (*recheck)(void *arg), void *arg)
{
    bell *b = d->mine;
    unsigned seen = atomic_load(&b->seq);
    atomic_fetch_add(&b->sleeping, 1);
    if (recheck(arg) <= 0) {
        struct timespec ts = {.tv_sec = timeout_us / 1000000,
                              .tv_nsec = (long)(timeout_us % 1000000) * 1000};
        syscall(SYS_futex, &b->seq, FUTEX_WAIT, seen, &ts, NULL, 0);
    }
    atomic_fetch_sub(&b->sleeping, 1);
}

void fr_doorbell_end(fr_doorbell *d)
{
    if (d)
        atomic_store(&d->mine->ended, 1);
}

int fr_doorbell_peer_ended(fr_doorbell *d, uint32_t peer)
{
    bell *b;
    if (!d || peer >= d->world || !(b = atomic_load(&d->peer[peer])))
        return 0;
    return atomic_load(&b->ended) != 0;
}

int fr_doorbell_loan_open(fr_doorbell *d, uint64_t tag)
{
    if (!d || !tag)
        return -1;
    unsigned from = atomic_load_explicit(&d->loan_next, memory_order_relaxed);
    for (unsigned n = 0; n < FR_DOORBELL_LOANS; n++) {
        unsigned i = (from + n) % FR_DOORBELL_LOANS;
        uint64_t free_slot = 0;
        if (atomic_load_explicit(&d->mine->loan[i], memory_order_relaxed) ==
                0 &&
            atomic_compare_exchange_strong(&d->mine->loan[i], &free_slot,
                                           tag)) {
            atomic_store_explicit(&d->loan_next, i + 1, memory_order_relaxed);
            return (int)i;
        }
    }
    return -1;
}

void fr_doorbell_loan_close(fr_doorbell *d, int slot)
{
    if (d && slot >= 0 && slot < FR_DOORBELL_LOANS)
        atomic_store(&d->mine->loan[slot], 0);
}

int fr_doorbell_peer_loan_is(fr_doorbell *d, uint32_t peer, int slot,
                             uint64_t tag)
{
    bell *b;
    if (!d || peer >= d->world || slot < 0 || slot >= FR_DOORBELL_LOANS ||
        !(b = atomic_load(&d->peer[peer])))
        return 0;
    return atomic_load(&b->loan[slot]) == tag;
}

void fr_doorbell_close(fr_doorbell *d)
{
    if (!d)
        return;
    fr_doorbell_unlink(d);
    for (uint32_t i = 0; i < d->world; i++) {
        bell *b = atomic_load(&d->peer[i]);
        if (b)
            munmap(b, sizeof(bell));
    }
    free(d->peer);
    free(d);
}
