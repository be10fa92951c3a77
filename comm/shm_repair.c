/*
 * See shm_repair.h. The layout relied on, libfabric 1.17's struct
 * smr_region (prov/shm/src/smr_util.h), as it starts:
 *   0  u8  version       (SMR_VERSION, 4 in 1.17)
 *   4  int pid           of the process that made the region
 *  16  ptr base_addr     the region's address in that process
 *  24  pthread_spinlock_t lock
 * It is only trusted when the running libfabric is 1.17 and both the
 * version and the pid match; what value means "free" is learnt from
 * glibc's own spin-lock functions (spin_values).
 */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
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

/* The value glibc gives a free spin lock on this machine (x86-64: 1;
 * elsewhere 0), read from a lock of our own. The shared lock is then only
 * read and, if stuck, stored to, with atomics: this thread never takes it
 * (nor do sanitizers see a lock taken by one process and released by
 * another). */
static int spin_free_value(void)
{
    pthread_spinlock_t l;
    int v;
    pthread_spin_init(&l, PTHREAD_PROCESS_SHARED);
    memcpy(&v, (const void *)&l, sizeof(v));
    pthread_spin_destroy(&l);
    return v;
}

/* 1 if the lock was never seen free for hold_ms and has been released. */
static int release_if_stuck(int *lock, unsigned hold_ms)
{
    int free_v = spin_free_value();
    uint64_t until = fr_now_ns() + (uint64_t)hold_ms * 1000000ull;
    for (;;) {
        if (__atomic_load_n(lock, __ATOMIC_ACQUIRE) == free_v)
            return 0; /* free now: nobody is stuck on it */
        if (fr_now_ns() >= until)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
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
    uint8_t *head = mmap(NULL, HEAD_LEN, PROT_READ | PROT_WRITE, MAP_SHARED,
                         fd, 0);
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
