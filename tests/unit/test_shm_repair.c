/*
 * Unit tests of the repair of a shm region's spin lock (comm/shm_repair.c)
 * on a region made here with libfabric 1.17's layout: a lock whose holder
 * died is released; a lock that live threads flood is never released
 * under them (CI once saw that under TSan: two threads inside at once);
 * a region of another layout or pid, or one that is gone, is left alone;
 * one whose name is gone but that this process maps is repaired there.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/fabric.h>

#include "comm/shm_repair.h"

#include "check_main.h"

#define REGION_LEN 4096
#define VERSION_117 4
#define PID_OFF 4
#define LOCK_OFF 24

static char name[64];
static uint8_t *region;

static pthread_spinlock_t *lock_of(uint8_t *r)
{
    return (pthread_spinlock_t *)(void *)(r + LOCK_OFF);
}

static void unlink_region(void)
{
    shm_unlink(name);
}

/* The layout shm_repair trusts: 1.17's version byte and the maker's pid. */
static void make_region(void)
{
    snprintf(name, sizeof(name), "/fabrpc-test-repair-%d", (int)getpid());
    int fd = shm_open(name, O_CREAT | O_RDWR | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, REGION_LEN), 0);
    region = mmap(NULL, REGION_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    ck_assert_ptr_ne(region, MAP_FAILED);
    region[0] = VERSION_117;
    int pid = getpid();
    memcpy(region + PID_OFF, &pid, sizeof(pid));
    pthread_spin_init(lock_of(region), PTHREAD_PROCESS_SHARED);
}

static void drop_region(void)
{
    munmap(region, REGION_LEN);
    unlink_region();
}

static const fr_fixture a_region = {make_region, drop_region};

static int is_117(void) { return fi_version() == FI_VERSION(1, 17); }

/* A child process takes the lock and exits: the holder is dead. */
static void die_holding_the_lock(void)
{
    pid_t c = fork();
    ck_assert_int_ge(c, 0);
    if (c == 0) {
        pthread_spin_lock(lock_of(region));
        _exit(0);
    }
    int st;
    ck_assert_int_eq(waitpid(c, &st, 0), c);
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(pthread_spin_trylock(lock_of(region)), EBUSY);
}

/* The repair's looks, rounds times: how many released. Then the name is
 * removed (the mapping stays): an assertion that fails after this ends
 * the test's process before the fixture's teardown, and leaves nothing
 * in /dev/shm. */
static int repair(int pid, unsigned hold_ms, int rounds)
{
    fr_shm_region_ref ref = {name, pid};
    int released = 0;
    for (int i = 0; i < rounds; i++)
        released += fr_shm_release_stuck(&ref, 1, hold_ms);
    unlink_region();
    return released;
}

START_TEST(a_lock_its_dead_holder_kept_is_released)
{
    die_holding_the_lock();
    ck_assert_int_eq(repair(getpid(), 50, 1), is_117());
    if (is_117()) {
        ck_assert_int_eq(pthread_spin_trylock(lock_of(region)), 0);
        pthread_spin_unlock(lock_of(region));
    }
}
END_TEST

/* Threads that take the lock, hold it a moment and take it again keep it
 * held nearly all the time, as senders flooding a region do. Each leaves
 * it for a few instructions between, as the provider's callers do: it
 * lets go of it only on its way out of a call. */
#define FLOODERS 8
static atomic_int stop, inside, both_inside;
static atomic_ulong entries;

static void *flood(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        pthread_spin_lock(lock_of(region));
        if (atomic_exchange(&inside, 1))
            atomic_store(&both_inside, 1);
        for (volatile int i = 0; i < 200; i++)
            ;
        atomic_store(&inside, 0);
        atomic_fetch_add(&entries, 1);
        pthread_spin_unlock(lock_of(region));
        for (volatile int i = 0; i < 20; i++)
            ;
    }
    return NULL;
}

START_TEST(a_lock_live_threads_flood_is_never_released)
{
    pthread_t t[FLOODERS];
    for (int i = 0; i < FLOODERS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, flood, NULL), 0);
    while (atomic_load(&entries) < 1000)
        usleep(1000);
    int released = repair(getpid(), 250, 8);
    atomic_store(&stop, 1);
    for (int i = 0; i < FLOODERS; i++)
        pthread_join(t[i], NULL);
    ck_assert_int_eq(released, 0);
    ck_assert_int_eq(atomic_load(&both_inside), 0);
}
END_TEST

/* Threads of live ranks that come to send to the region while the
 * repair watches: each spins in pthread_spin_lock, and glibc counts it
 * below 0 once as it comes. CI: a survivor's fi_read came to wait on a
 * lock a killed rank held during the looks, the repair called the
 * changed value a live holder, and two ranks spun for ever. */
#define LATE_WAITERS 4
#define LATE_EVERY_US 25000
static atomic_int waited_in;

static void *wait_on_the_lock(void *arg)
{
    (void)arg;
    pthread_spin_lock(lock_of(region));
    atomic_fetch_add(&waited_in, 1);
    pthread_spin_unlock(lock_of(region));
    return NULL;
}

static void *come_late(void *arg)
{
    pthread_t *w = arg;
    for (int i = 0; i < LATE_WAITERS; i++) {
        usleep(LATE_EVERY_US);
        ck_assert_int_eq(pthread_create(&w[i], NULL, wait_on_the_lock, NULL),
                         0);
    }
    return NULL;
}

START_TEST(a_dead_holders_lock_waited_on_during_the_looks_is_released)
{
    die_holding_the_lock();
    pthread_t starter, w[LATE_WAITERS];
    ck_assert_int_eq(pthread_create(&starter, NULL, come_late, w), 0);
    /* The waiters come at 25..100 ms, within the 250 ms watch. */
    int released = repair(getpid(), 250, 1);
    pthread_join(starter, NULL);
    if (!released) /* let the waiters go, to end the test cleanly */
        pthread_spin_unlock(lock_of(region));
    for (int i = 0; i < LATE_WAITERS; i++)
        pthread_join(w[i], NULL);
    ck_assert_int_eq(released, is_117());
    ck_assert_int_eq(atomic_load(&waited_in), LATE_WAITERS);
}
END_TEST

/* Every survivor on the host watches the regions at once (CI: ranks 0
 * and 2 both watched rank 0's lock, while their own threads came to wait
 * on it): the lock is released once, and the waiters all get in. */
#define WATCHERS 2
static void *watch(void *arg)
{
    fr_shm_region_ref ref = {name, getpid()};
    *(int *)arg = fr_shm_release_stuck(&ref, 1, 250);
    return NULL;
}

START_TEST(watchers_at_once_release_a_dead_holders_lock_once)
{
    die_holding_the_lock();
    pthread_t starter, w[LATE_WAITERS], t[WATCHERS];
    int released[WATCHERS];
    ck_assert_int_eq(pthread_create(&starter, NULL, come_late, w), 0);
    for (int i = 0; i < WATCHERS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, watch, &released[i]), 0);
    int total = 0;
    for (int i = 0; i < WATCHERS; i++) {
        pthread_join(t[i], NULL);
        total += released[i];
    }
    unlink_region();
    pthread_join(starter, NULL);
    if (!total)
        pthread_spin_unlock(lock_of(region));
    for (int i = 0; i < LATE_WAITERS; i++)
        pthread_join(w[i], NULL);
    ck_assert_int_eq(total, is_117());
    ck_assert_int_eq(atomic_load(&waited_in), LATE_WAITERS);
    ck_assert_int_eq(pthread_spin_trylock(lock_of(region)), 0);
    pthread_spin_unlock(lock_of(region));
}
END_TEST

START_TEST(a_free_lock_is_left_free)
{
    ck_assert_int_eq(repair(getpid(), 50, 1), 0);
    ck_assert_int_eq(pthread_spin_trylock(lock_of(region)), 0);
    pthread_spin_unlock(lock_of(region));
}
END_TEST

START_TEST(another_pid_is_left_alone)
{
    die_holding_the_lock();
    ck_assert_int_eq(repair(getpid() + 1, 20, 1), 0);
    ck_assert_int_eq(pthread_spin_trylock(lock_of(region)), EBUSY);
}
END_TEST

START_TEST(another_layout_is_left_alone)
{
    die_holding_the_lock();
    region[0] = VERSION_117 + 1;
    ck_assert_int_eq(repair(getpid(), 20, 1), 0);
    ck_assert_int_eq(pthread_spin_trylock(lock_of(region)), EBUSY);
}
END_TEST

/* Its process removed the name (at exit, exit_unlink.h) but a sender to it
 * still has it mapped: the repair finds it among this process's mappings. */
START_TEST(a_region_whose_name_is_gone_is_repaired_through_our_mapping)
{
    die_holding_the_lock();
    unlink_region();
    fr_shm_region_ref ref = {name, getpid()};
    ck_assert_int_eq(fr_shm_release_stuck(&ref, 1, 50), is_117());
    if (is_117()) {
        ck_assert_int_eq(pthread_spin_trylock(lock_of(region)), 0);
        pthread_spin_unlock(lock_of(region));
    }
}
END_TEST

START_TEST(a_region_that_is_gone_is_skipped)
{
    fr_shm_region_ref refs[2] = {{"/fabrpc-test-repair-none", getpid()},
                                 {NULL, getpid()}};
    ck_assert_int_eq(fr_shm_release_stuck(refs, 2, 20), 0);
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        {"a lock its dead holder kept is released",
         a_lock_its_dead_holder_kept_is_released, .fixture = &a_region},
        {"a lock live threads flood is never released under them",
         a_lock_live_threads_flood_is_never_released, .fixture = &a_region},
        {"a dead holder's lock waited on during the looks is released",
         a_dead_holders_lock_waited_on_during_the_looks_is_released,
         .fixture = &a_region},
        {"watchers at once release a dead holder's lock once",
         watchers_at_once_release_a_dead_holders_lock_once,
         .fixture = &a_region},
        {"a free lock is left free", a_free_lock_is_left_free,
         .fixture = &a_region},
        {"a region another process made is left alone",
         another_pid_is_left_alone, .fixture = &a_region},
        {"a region of another layout is left alone",
         another_layout_is_left_alone, .fixture = &a_region},
        {"a region whose name is gone is repaired through our mapping",
         a_region_whose_name_is_gone_is_repaired_through_our_mapping,
         .fixture = &a_region},
        {"a region that is gone is skipped", a_region_that_is_gone_is_skipped},
    };
    return fr_run_tests("shm_repair", tests, sizeof(tests) / sizeof(tests[0]),
                        60);
}
