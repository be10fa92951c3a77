/*
 * See shm_repair.h. The layout relied on, libfabric 1.17's struct
 * smr_region (include/ofi_shm.h), as it starts:
 *   0  u8  version       (SMR_VERSION, 4 in 1.17)
 *   4  int pid           of the process that made the region
 *  16  ptr base_addr     the region's address in that process
 *  24  pthread_spinlock_t lock
 *  28  int signal      set by a sender: the owner's progress reads its queue
 * It is only trusted when the running libfabric is 1.17 and both the
 * version and the pid match; what values mean "free" and "taken" is
 * learnt from glibc's own spin-lock functions (spin_values).
 */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>

#include "comm/clock.h"
#include "comm/shm_repair.h"

#define SMR_V117_VERSION 4
#define SMR_V117_PID_OFF 4
#define SMR_V117_LOCK_OFF 24
#define SMR_V117_SIGNAL_OFF 28
#define HEAD_LEN 4096

_Static_assert(sizeof(pthread_spinlock_t) == sizeof(int),
               "glibc's spin lock is one int");

/* How long one look keeps watching the lock before it yields the CPU
 * (sched_yield): a holder that was preempted may be waiting for it, and
 * sleeping instead lets the watcher's wake-ups preempt the holder each
 * time (a flood of 8 threads on 2 cores: a live lock looked stuck). */
#define LOOK_NS 1000000ull

/* The values glibc gives a free and a taken spin lock on this machine
 * (x86-64: 1 and 0; elsewhere 0 and 1), read from a lock of our own. The
 * shared lock is then taken and released only with atomics, as glibc's own
 * trylock and unlock do: sanitizers see no lock taken by one process and
 * released by another. */
static void spin_values(int *free_v, int *taken_v)
{
    pthread_spinlock_t l;
    pthread_spin_init(&l, PTHREAD_PROCESS_SHARED);
    memcpy(free_v, (const void *)&l, sizeof(*free_v));
    pthread_spin_trylock(&l);
    memcpy(taken_v, (const void *)&l, sizeof(*taken_v));
    pthread_spin_unlock(&l);
    pthread_spin_destroy(&l);
}

/* glibc's spin lock on x86: a taker decrements it (from free, 1, to 0: it
 * holds it), a waiter does the same once each time it sees it free and
 * then spins while it is 0 or below, and a release stores 1. So while the
 * lock is held, threads that come to wait only move it further below 0,
 * and only a release brings it back up. The watcher moves it down too, by
 * MARK at each look: a release erases its marks, so after a hand-over the
 * lock stays far above what the watcher last saw whenever it looks, not
 * only during the few instructions of the hand-over; and waiters that
 * come (a survivor's fi_read: CI), or another rank's watcher with marks
 * of its own, can never bring it back up. Elsewhere glibc's lock is only
 * 0 or 1 (a compare-and-swap): there the watcher only reads it and tries
 * to take it. */
#if defined(__x86_64__) || defined(__i386__)
#define COUNTS_WAITERS 1
#else
#define COUNTS_WAITERS 0
#endif
#define MARK 65536          /* far more than the threads that could wait */
#define MARK_FLOOR (-(1 << 30)) /* no marks below: the int never wraps */

/* 1 if v is further from free than held: marks and waiters, not a release. */
static int further(int v, int held, int free_v, int taken_v)
{
    return free_v > taken_v ? v < held : v > held;
}

/* One look of LOOK_NS at a lock last seen held at *held: 1 if a release
 * was seen (the lock taken here and let go at once, or back nearer free
 * than *held), else 0 with *held the value last seen. Seeing the lock
 * held now and then is not enough: senders that flood a region keep it
 * held nearly all the time, 7 of 8 flooders wait on it at one value, and
 * hand-overs last a few instructions (CI, TSan: such a lock was
 * "released" under a live holder, and two threads were inside the
 * provider's queue at once). A mark left on a lock that stays held only
 * lowers a count no one reads. */
static int seen_alive(int *lock, int *held, int free_v, int taken_v)
{
    if (COUNTS_WAITERS && free_v == 1 && taken_v == 0 &&
        *held > MARK_FLOOR) {
        int was = __atomic_fetch_sub(lock, MARK, __ATOMIC_ACQUIRE);
        if (was == free_v) { /* it was free: taken by the mark */
            __atomic_store_n(lock, free_v, __ATOMIC_RELEASE);
            return 1;
        }
        if (further(*held, was, free_v, taken_v))
            return 1; /* back up since the last look: released */
        *held = was - MARK;
    }
    uint64_t until = fr_now_ns() + LOOK_NS;
    for (unsigned i = 1;; i++) {
        int v = __atomic_load_n(lock, __ATOMIC_RELAXED);
        if (v != *held && v != free_v) {
            if (!further(v, *held, free_v, taken_v))
                return 1; /* released and taken again */
            *held = v;
        }
        int expect = free_v;
        if (v == free_v &&
            __atomic_compare_exchange_n(lock, &expect, taken_v, 0,
                                        __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
            __atomic_store_n(lock, free_v, __ATOMIC_RELEASE);
            return 1;
        }
        if (i % 64 == 0 && fr_now_ns() >= until)
            return 0;
    }
}

/* Releases a lock last seen held at held, unless it was released since:
 * only from a value further from free (more waiters or marks). 1 if it
 * released it. */
static int release_from(int *lock, int held, int free_v, int taken_v)
{
    int v = held;
    while (!__atomic_compare_exchange_n(lock, &v, free_v, 0,
                                        __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        if (v == free_v || !further(v, held, free_v, taken_v))
            return 0;
        else
            held = v;
    return 1;
}

/* 1 if the lock was not seen released for hold_ms of watching, over at
 * least one look per 8 ms of it (a paused machine's clock jump is not a
 * wait), and has been released. Two ranks' watchers may watch one lock
 * at once: the first to end releases it, and the other then sees it
 * released, so it does not release it again under a new holder. */
static int release_if_stuck(int *lock, unsigned hold_ms)
{
    int free_v, taken_v;
    spin_values(&free_v, &taken_v);
    int held = __atomic_load_n(lock, __ATOMIC_ACQUIRE);
    if (held == free_v)
        return 0;
    uint64_t until = fr_now_ns() + (uint64_t)hold_ms * 1000000ull;
    unsigned looks = 0;
    for (;;) {
        if (seen_alive(lock, &held, free_v, taken_v))
            return 0; /* a live holder: nobody is stuck on it */
        looks++;
        if (fr_now_ns() >= until && looks >= hold_ms / 8)
            break;
        sched_yield();
    }
    return release_from(lock, held, free_v, taken_v); /* its holder is gone */
}

/* This process's own mapping of the region named name, from its start,
 * or NULL: a region whose name was removed (its process exited without
 * closing it: exit_unlink.h) is still mapped by every peer that sent to
 * it, and only such a peer can be stuck on its lock. */
static uint8_t *mapped_here(const char *name)
{
    char want[160], line[512];
    uint8_t *at = NULL;
    FILE *maps = fopen("/proc/self/maps", "re");
    if (!maps)
        return NULL;
    snprintf(want, sizeof(want), "/dev/shm/%s", name + (name[0] == '/'));
    size_t wlen = strlen(want);
    while (!at && fgets(line, sizeof(line), maps)) {
        unsigned long start, end, off;
        int path = 0;
        if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %n", &start, &end, &off,
                   &path) < 3 || !path || off != 0 || end - start < HEAD_LEN)
            continue;
        const char *p = line + path;
        if (strncmp(p, want, wlen) == 0 &&
            (p[wlen] == '\n' || strncmp(p + wlen, " (deleted)", 10) == 0))
            at = (uint8_t *)start;
    }
    fclose(maps);
    return at;
}

/* The head of the region named name, made by pid, in libfabric 1.17's
 * layout: mapped here by name (*ours = 1: the caller unmaps it,
 * HEAD_LEN), else this process's own mapping of it (mapped_here); NULL if
 * neither, or another layout or maker. */
static uint8_t *region_head(const char *name, int pid, int *ours)
{
    int fd = shm_open(name, O_RDWR, 0);
    uint8_t *head = NULL;
    *ours = fd >= 0;
    if (*ours) {
        head = mmap(NULL, HEAD_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (head == MAP_FAILED)
            return NULL;
    } else if (!(head = mapped_here(name))) {
        return NULL;
    }
    int made_by;
    memcpy(&made_by, head + SMR_V117_PID_OFF, sizeof(made_by));
    if (head[0] == SMR_V117_VERSION && made_by == pid)
        return head;
    if (*ours)
        munmap(head, HEAD_LEN);
    return NULL;
}

static int repair_one(const fr_shm_region_ref *r, unsigned hold_ms)
{
    int ours, released = 0;
    uint8_t *head = region_head(r->name, r->pid, &ours);
    if (!head)
        return 0;
    released = release_if_stuck((int *)(void *)(head + SMR_V117_LOCK_OFF),
                                hold_ms);
    if (ours)
        munmap(head, HEAD_LEN);
    return released;
}

int fr_shm_take_lock(const char *name, int pid)
{
    int ours;
    uint8_t *head = fi_version() == FI_VERSION(1, 17)
                        ? region_head(name, pid, &ours)
                        : NULL;
    if (!head)
        return -1;
    int free_v, taken_v;
    spin_values(&free_v, &taken_v);
    int *lock = (int *)(void *)(head + SMR_V117_LOCK_OFF);
    for (;;) {
        int expect = free_v;
        if (__atomic_compare_exchange_n(lock, &expect, taken_v, 0,
                                        __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
            __atomic_store_n((int *)(void *)(head + SMR_V117_SIGNAL_OFF), 1,
                             __ATOMIC_RELEASE);
            return 0;
        }
        sched_yield();
    }
}

int fr_shm_release_stuck(const fr_shm_region_ref *regions, int n,
                         unsigned hold_ms)
{
    int released = 0;
    /* Another libfabric may lay its regions out otherwise. */
    if (fi_version() != FI_VERSION(1, 17))
        return 0;
    for (int i = 0; i < n; i++)
        if (regions[i].name && regions[i].pid > 0)
            released += repair_one(&regions[i], hold_ms);
    return released;
}
