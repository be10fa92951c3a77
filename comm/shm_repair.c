/*
 * See shm_repair.h. The layout relied on, libfabric 1.17's struct
 * smr_region (include/ofi_shm.h), as it starts:
 *   0  u8  version       (SMR_VERSION, 4 in 1.17)
 *   4  int pid           of the process that made the region
 *  16  ptr base_addr     the region's address in that process
 *  24  pthread_spinlock_t lock
 * It is only trusted when the running libfabric is 1.17 and both the
 * version and the pid match; what values mean "free" and "taken" is
 * learnt from glibc's own spin-lock functions (spin_values).
 */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
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

/* One look: 1 if the lock was seen alive in LOOK_NS: taken here (and let
 * go again), or holding another value than held, the value it had when
 * first seen held (glibc on x86-64 counts contending takers below 0 while
 * it is held; a dead holder's lock keeps one value for ever). Seeing it
 * held now and then is not enough: senders that flood a region keep its
 * lock held nearly all the time, and a thread that only reads it now and
 * then sees it held every time (CI, TSan: such a lock was "released"
 * under a live holder, and two threads were inside the provider's queue
 * at once). */
static int seen_alive(int *lock, int held, int free_v, int taken_v)
{
    uint64_t until = fr_now_ns() + LOOK_NS;
    for (unsigned i = 1;; i++) {
        int v = __atomic_load_n(lock, __ATOMIC_RELAXED);
        if (v != held && v != free_v)
            return 1;
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

/* 1 if the lock was not seen alive for hold_ms of watching, over at
 * least one look per 8 ms of it (a paused machine's clock jump is not a
 * wait), and has been released. */
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
        if (seen_alive(lock, held, free_v, taken_v))
            return 0; /* a live holder: nobody is stuck on it */
        looks++;
        if (fr_now_ns() >= until && looks >= hold_ms / 8)
            break;
        sched_yield();
    }
    __atomic_store_n(lock, free_v, __ATOMIC_RELEASE); /* its holder is gone */
    return 1;
}

static int repair_one(const fr_shm_region_ref *r, unsigned hold_ms)
{
    int fd = shm_open(r->name, O_RDWR, 0);
    int released = 0;
    if (fd < 0)
        return 0;
    uint8_t *head =
        mmap(NULL, HEAD_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (head == MAP_FAILED)
        return 0;
    int pid;
    memcpy(&pid, head + SMR_V117_PID_OFF, sizeof(pid));
    if (head[0] == SMR_V117_VERSION && pid == r->pid)
        released = release_if_stuck((int *)(void *)(head + SMR_V117_LOCK_OFF),
                                    hold_ms);
    munmap(head, HEAD_LEN);
    return released;
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
