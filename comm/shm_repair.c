/*
 * See shm_repair.h. The layout relied on, libfabric 1.17's struct
 * smr_region (prov/shm/src/smr_util.h), as it starts:
 *   0  u8  version       (SMR_VERSION, 4 in 1.17)
 *   4  int pid           of the process that made the region
 *  16  ptr base_addr     the region's address in that process
 *  24  pthread_spinlock_t lock
 * It is only trusted when the running libfabric is 1.17 and both the
 * version and the pid match; the lock is then handled with glibc's own
 * spin-lock functions, whatever value means "free" on this machine.
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

/* 1 if the lock was held for all of hold_ms and has been released. */
static int release_if_stuck(pthread_spinlock_t *lock, unsigned hold_ms)
{
    uint64_t until = fr_now_ns() + (uint64_t)hold_ms * 1000000ull;
    for (;;) {
        if (pthread_spin_trylock(lock) == 0) {
            pthread_spin_unlock(lock); /* free: nobody is stuck */
            return 0;
        }
        if (fr_now_ns() >= until)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    pthread_spin_unlock(lock); /* its holder is gone */
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
        released = release_if_stuck(
            (pthread_spinlock_t *)(void *)(head + SMR_V117_LOCK_OFF),
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
