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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "comm/doorbell.h"
#include "comm/exit_unlink.h"
#include "comm/threads.h"

/* A peer's row of holds in an owner's bell (fr_doorbell_region_hold):
 * FR_HOLD_NAMED entries, each (slot + 1) << FR_HOLD_SLOT_SHIFT | count
 * (0: free), then the catch-all, a bare count. Two cache lines. */
#define FR_HOLD_NAMED 15
#define FR_HOLD_ROW (FR_HOLD_NAMED + 1)
#define FR_HOLD_CATCH_ALL FR_HOLD_NAMED
#define FR_HOLD_SLOT_SHIFT 48
#define FR_HOLD_COUNT ((UINT64_C(1) << FR_HOLD_SLOT_SHIFT) - 1)
#define FR_REGION_SEALED UINT64_MAX

typedef struct bell {
    atomic_uint seq;      /* the futex word: bumped by every ring */
    atomic_uint sleeping; /* threads of the owner (about to be) asleep */
    atomic_uint ended;    /* fr_doorbell_end */
    /* fr_doorbell_loan_open's tags and fr_doorbell_region_open's; 0: a
     * free slot. Only the owner's threads write them (compare-and-swap),
     * peers read. A line of their own: seq is written by every ring. */
    _Alignas(64) _Atomic uint64_t loan[FR_DOORBELL_LOANS];
    _Atomic uint64_t region[FR_DOORBELL_REGIONS];
    /* world rows of FR_HOLD_ROW: row p is written by peer p only */
    _Alignas(64) _Atomic uint64_t hold[];
} bell;

struct fr_doorbell {
    char base[96];
    uint32_t rank, world;
    size_t size; /* of every bell of the job: its rows depend on world */
    int linked;
    fr_exit_name *exit_name; /* our name, removed at exit if still there */
    bell *mine;
    /* world entries, NULL until connected: written by the thread that
     * connects, read by every sender */
    _Atomic(bell *) *peer;
    /* where the slot tables' open looks first: past the slot it took
     * last, so that a full table's scan is not the common case */
    atomic_uint loan_next, region_next;
};

void fr_doorbell_name(const char *base, uint32_t rank, char *buf,
                      size_t len)
{
    snprintf(buf, len, "/%s_bell_%u", base, rank);
}

static bell *map_bell(int fd, size_t size)
{
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
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
    d->size = sizeof(bell) + (size_t)world * FR_HOLD_ROW * sizeof(uint64_t);
    fr_doorbell_name(d->base, rank, name, sizeof(name));
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)d->size) != 0 ||
        !(d->mine = map_bell(fd, d->size))) {
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
    /* A bell of another size is no bell of this job's (another world):
     * mapping it would let a transfer's hold write past its end. */
    struct stat st;
    bell *b = fstat(fd, &st) == 0 && (size_t)st.st_size == d->size
                  ? map_bell(fd, d->size)
                  : NULL;
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

static bell *peer_bell(fr_doorbell *d, uint32_t peer)
{
    return d && peer < d->world ? atomic_load(&d->peer[peer]) : NULL;
}

void fr_doorbell_ring(fr_doorbell *d, uint32_t peer)
{
    bell *b = peer_bell(d, peer);
    if (!b || !atomic_load(&b->sleeping))
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
    bell *b = peer_bell(d, peer);
    return b && atomic_load(&b->ended) != 0;
}

/* Takes a free slot of table t for tag, looking from *next on. */
static int table_open(_Atomic uint64_t *t, unsigned n, atomic_uint *next,
                      uint64_t tag)
{
    unsigned from = atomic_load_explicit(next, memory_order_relaxed);
    for (unsigned k = 0; k < n; k++) {
        unsigned i = (from + k) % n;
        uint64_t free_slot = 0;
        if (atomic_load_explicit(&t[i], memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong(&t[i], &free_slot, tag)) {
            atomic_store_explicit(next, i + 1, memory_order_relaxed);
            return (int)i;
        }
    }
    return -1;
}

int fr_doorbell_loan_open(fr_doorbell *d, uint64_t tag)
{
    if (!d || !tag)
        return -1;
    return table_open(d->mine->loan, FR_DOORBELL_LOANS, &d->loan_next, tag);
}

void fr_doorbell_loan_close(fr_doorbell *d, int slot)
{
    if (d && slot >= 0 && slot < FR_DOORBELL_LOANS)
        atomic_store(&d->mine->loan[slot], 0);
}

int fr_doorbell_peer_loan_is(fr_doorbell *d, uint32_t peer, int slot,
                             uint64_t tag)
{
    bell *b = peer_bell(d, peer);
    if (!b || slot < 0 || slot >= FR_DOORBELL_LOANS)
        return 0;
    return atomic_load(&b->loan[slot]) == tag;
}

int fr_doorbell_region_open(fr_doorbell *d, uint64_t tag)
{
    if (!d || !tag || tag == FR_REGION_SEALED)
        return -1;
    return table_open(d->mine->region, FR_DOORBELL_REGIONS, &d->region_next,
                      tag);
}

static int region_slot_ok(const fr_doorbell *d, int slot)
{
    return d && slot >= 0 && slot < FR_DOORBELL_REGIONS;
}

void fr_doorbell_region_seal(fr_doorbell *d, int slot)
{
    if (region_slot_ok(d, slot))
        atomic_store(&d->mine->region[slot], FR_REGION_SEALED);
}

void fr_doorbell_region_unseal(fr_doorbell *d, int slot, uint64_t tag)
{
    if (region_slot_ok(d, slot))
        atomic_store(&d->mine->region[slot], tag);
}

void fr_doorbell_region_close(fr_doorbell *d, int slot)
{
    if (region_slot_ok(d, slot))
        atomic_store(&d->mine->region[slot], 0);
}

static _Atomic uint64_t *hold_row(bell *b, uint32_t peer)
{
    return &b->hold[(size_t)peer * FR_HOLD_ROW];
}

/* Counts one more hold on slot in row: the entry's index. An entry
 * keeps its slot when its count falls to 0 (a transfer after another on
 * the same region then costs one atomic step, not two) and is taken over
 * by another slot only when no entry is free. */
static int hold_take(_Atomic uint64_t *row, int slot)
{
    const uint64_t mark = (uint64_t)(slot + 1) << FR_HOLD_SLOT_SHIFT;
    for (;;) {
        int free_at = -1, idle_at = -1, raced = 0;
        for (int i = 0; i < FR_HOLD_NAMED && !raced; i++) {
            uint64_t w = atomic_load(&row[i]);
            if ((w & ~FR_HOLD_COUNT) == mark &&
                (w & FR_HOLD_COUNT) < FR_HOLD_COUNT) {
                if (atomic_compare_exchange_strong(&row[i], &w, w + 1))
                    return i;
                raced = 1; /* another thread of ours changed it */
            } else if (w == 0 && free_at < 0)
                free_at = i;
            else if ((w & FR_HOLD_COUNT) == 0 && idle_at < 0)
                idle_at = i;
        }
        if (raced)
            continue;
        int at = free_at >= 0 ? free_at : idle_at;
        if (at < 0) {
            atomic_fetch_add(&row[FR_HOLD_CATCH_ALL], 1);
            return FR_HOLD_CATCH_ALL;
        }
        uint64_t was = atomic_load(&row[at]);
        if ((was & FR_HOLD_COUNT) == 0 &&
            atomic_compare_exchange_strong(&row[at], &was, mark | 1))
            return at;
    }
}

static void hold_give(_Atomic uint64_t *row, int i)
{
    atomic_fetch_sub(&row[i], 1);
}

/* 1 if tag can name a live region in a slot. */
static int tag_ok(int slot, uint64_t tag)
{
    return slot >= 0 && slot < FR_DOORBELL_REGIONS && tag &&
           tag != FR_REGION_SEALED;
}

int fr_doorbell_region_listed(fr_doorbell *d, uint32_t owner, int slot,
                              uint64_t tag)
{
    bell *b = peer_bell(d, owner);
    return !b || (tag_ok(slot, tag) && atomic_load(&b->region[slot]) == tag);
}

int fr_doorbell_region_hold(fr_doorbell *d, uint32_t owner, int slot,
                            uint64_t tag)
{
    bell *b = peer_bell(d, owner);
    if (!b)
        return FR_REGION_UNCHECKED;
    if (!tag_ok(slot, tag))
        return FR_REGION_GONE;
    _Atomic uint64_t *row = hold_row(b, d->rank);
    int i = hold_take(row, slot);
    /* After the hold (both sequentially consistent): see doorbell.h. */
    if (atomic_load(&b->region[slot]) == tag)
        return i;
    hold_give(row, i);
    return FR_REGION_GONE;
}

void fr_doorbell_region_release(fr_doorbell *d, uint32_t owner, int hold)
{
    bell *b = peer_bell(d, owner);
    if (b && hold >= 0 && hold < FR_HOLD_ROW)
        hold_give(hold_row(b, d->rank), hold);
}

uint64_t fr_doorbell_region_held_by(fr_doorbell *d, uint32_t peer, int slot)
{
    if (!region_slot_ok(d, slot) || peer >= d->world)
        return 0;
    const uint64_t mark = (uint64_t)(slot + 1) << FR_HOLD_SLOT_SHIFT;
    _Atomic uint64_t *row = hold_row(d->mine, peer);
    uint64_t n = atomic_load(&row[FR_HOLD_CATCH_ALL]);
    for (int i = 0; i < FR_HOLD_NAMED; i++) {
        uint64_t w = atomic_load(&row[i]);
        if ((w & ~FR_HOLD_COUNT) == mark)
            n += w & FR_HOLD_COUNT;
    }
    return n;
}

void fr_doorbell_close(fr_doorbell *d)
{
    if (!d)
        return;
    fr_doorbell_unlink(d);
    for (uint32_t i = 0; i < d->world; i++) {
        bell *b = atomic_load(&d->peer[i]);
        if (b)
            munmap(b, d->size);
    }
    free(d->peer);
    free(d);
}
