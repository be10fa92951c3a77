/*
 * Unit tests of the signal hold frpc_init runs under (comm/signal_hold.c):
 * a signal sent to a held thread is delivered only while it waits in
 * fr_hold_poll or when the hold ends; the thread's mask is put back as it
 * was; and exit() from another thread waits until the held thread leaves
 * its busy part, which then never returns into the library.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "comm/signal_hold.h"

static volatile sig_atomic_t taken;

static void count_it(int sig)
{
    (void)sig;
    taken++;
}

static void catch_usr1(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = count_it;
    sigemptyset(&sa.sa_mask);
    ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
    taken = 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

START_TEST(held_until_the_hold_ends)
{
    catch_usr1();
    fr_hold_begin();
    ck_assert_int_eq(pthread_kill(pthread_self(), SIGUSR1), 0);
    ck_assert_int_eq(taken, 0);
    fr_hold_begin(); /* nested: changes nothing */
    fr_hold_end();
    ck_assert_int_eq(taken, 0);
    fr_hold_end();
    ck_assert_int_eq(taken, 1);
}
END_TEST

START_TEST(taken_while_the_holder_waits)
{
    catch_usr1();
    fr_hold_begin();
    ck_assert_int_eq(pthread_kill(pthread_self(), SIGUSR1), 0);
    ck_assert_int_eq(taken, 0);
    errno = 0;
    ck_assert_int_eq(fr_hold_poll(NULL, 0, 0), -1);
    ck_assert_int_eq(errno, EINTR);
    ck_assert_int_eq(taken, 1);
    /* held again once the wait is over */
    ck_assert_int_eq(pthread_kill(pthread_self(), SIGUSR1), 0);
    ck_assert_int_eq(taken, 1);
    fr_hold_end();
    ck_assert_int_eq(taken, 2);
}
END_TEST

static pthread_t holder;

static void *signal_later(void *arg)
{
    (void)arg;
    usleep(100000);
    pthread_kill(holder, SIGUSR1);
    return NULL;
}

START_TEST(a_signal_during_a_wait_ends_it)
{
    catch_usr1();
    holder = pthread_self();
    fr_hold_begin();
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, signal_later, NULL), 0);
    double t0 = now_s();
    errno = 0;
    int rc = fr_hold_poll(NULL, 0, 60000);
    double waited = now_s() - t0;
    ck_assert_int_eq(rc, -1);
    ck_assert_int_eq(errno, EINTR);
    ck_assert_int_eq(taken, 1);
    ck_assert_msg(waited < 30, "the wait went on for %.1f s", waited);
    pthread_join(t, NULL);
    fr_hold_end();
}
END_TEST

START_TEST(the_mask_is_put_back)
{
    catch_usr1();
    sigset_t usr2, now;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    ck_assert_int_eq(pthread_sigmask(SIG_BLOCK, &usr2, NULL), 0);
    signal(SIGUSR2, SIG_DFL); /* would end the test if it got through */
    fr_hold_begin();
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    ck_assert(sigismember(&now, SIGUSR1) && sigismember(&now, SIGTERM));
    /* what the caller blocked stays blocked in the waits */
    ck_assert_int_eq(pthread_kill(pthread_self(), SIGUSR2), 0);
    ck_assert_int_eq(fr_hold_poll(NULL, 0, 10), 0);
    fr_hold_end();
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    ck_assert(sigismember(&now, SIGUSR2));
    ck_assert(!sigismember(&now, SIGUSR1) && !sigismember(&now, SIGTERM));
    /* faults and abort are never held */
    fr_hold_begin();
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    ck_assert(!sigismember(&now, SIGSEGV) && !sigismember(&now, SIGABRT));
    fr_hold_end();
    sigset_t pending;
    sigpending(&pending);
    ck_assert(sigismember(&pending, SIGUSR2)); /* still waiting, unseen */
}
END_TEST

/* ---- exit from another thread ------------------------------------------ */

static int report[2]; /* the held thread's steps, to the parent */
static int busy_then_wait;
static atomic_int began;

static void step(const char *c)
{
    if (write(report[1], c, 1) != 1)
        _exit(98);
}

static void *held_thread(void *arg)
{
    (void)arg;
    fr_hold_begin();
    step("B");
    atomic_store(&began, 1);
    usleep(300000); /* busy: not a wait of the hold's */
    step("W");
    if (busy_then_wait)
        fr_hold_poll(NULL, 0, 60000);
    else
        fr_hold_end();
    step("R"); /* never: it stops */
    return NULL;
}

/* waitpid with a bound: a child that hangs is killed and reported. */
static int wait_child(pid_t pid, double secs)
{
    int st;
    double t0 = now_s();
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (now_s() - t0 > secs) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            ck_abort_msg("the child still ran after %.0f s", secs);
        }
        usleep(10000);
    }
    return st;
}

/* The steps the child wrote, once it has ended (its end closed the pipe). */
static void read_steps(char *steps, size_t len)
{
    size_t n = 0;
    ssize_t r;
    close(report[1]);
    while (n < len - 1 && (r = read(report[0], steps + n, len - 1 - n)) > 0)
        n += (size_t)r;
    steps[n] = '\0';
    close(report[0]);
}

/* The child pid exits 5, having written the steps want. */
static void expect_exit_5_after(pid_t pid, const char *want)
{
    int st = wait_child(pid, 30);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 5, "status %#x", st);
    char steps[8];
    read_steps(steps, sizeof(steps));
    ck_assert_str_eq(steps, want);
}

/* A child whose main thread exits while another is held and busy: the
 * exit must wait until that thread reaches its wait (or its hold's end),
 * and the thread must not come back from it. */
static void exit_during_hold(int wait_in_poll)
{
    ck_assert_int_eq(pipe(report), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(report[0]);
        busy_then_wait = wait_in_poll;
        pthread_t t;
        if (pthread_create(&t, NULL, held_thread, NULL) != 0)
            _exit(99);
        while (!atomic_load(&began))
            usleep(1000);
        exit(5);
    }
    expect_exit_5_after(pid, "BW");
}

START_TEST(exit_waits_for_a_held_thread_to_wait)
{
    exit_during_hold(1);
}
END_TEST

START_TEST(exit_waits_for_a_held_thread_to_end_its_hold)
{
    exit_during_hold(0);
}
END_TEST

/* ---- exit on the held thread itself ---------------------------------- */

START_TEST(a_held_thread_that_exits_is_not_waited_for)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        fr_hold_begin();
        exit(5); /* the exit handler must not wait 10 s for this thread */
    }
    double t0 = now_s();
    int st = wait_child(pid, 30);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 5, "status %#x", st);
    ck_assert_msg(now_s() - t0 < 5, "exit took %.1f s", now_s() - t0);
}
END_TEST

/* Registered before signal_hold's own exit handler (a constructor of a
 * higher priority), so it runs after it, as a program's handler does
 * when the program loads libfabrpc with dlopen after atexit(). */
static int hold_when_exiting;

static void late_exit_handler(void)
{
    if (!hold_when_exiting)
        return;
    fr_hold_begin(); /* frpc_shutdown from a program's exit handler */
    step("H");
    fr_hold_poll(NULL, 0, 1);
    fr_hold_end();
    step("E");
}

__attribute__((constructor(101))) static void register_late_exit_handler(void)
{
    atexit(late_exit_handler);
}

START_TEST(the_exiting_thread_may_hold_in_an_exit_handler)
{
    ck_assert_int_eq(pipe(report), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(report[0]);
        hold_when_exiting = 1;
        exit(5);
    }
    expect_exit_5_after(pid, "HE");
}
END_TEST

/* A fork child has only the forking thread: another thread's hold in
 * the parent (frpc_init under way there) is not waited for by the
 * child's exit, which took 10 s. (A child of a process whose other
 * thread is inside libfabric can still hang in libfabric's destructor:
 * the header tells such children to use _exit.) */
START_TEST(a_fork_child_does_not_wait_for_the_parents_held_thread)
{
    pthread_t th;
    ck_assert_int_eq(pipe(report), 0);
    ck_assert_int_eq(pthread_create(&th, NULL, held_thread, NULL), 0);
    while (!atomic_load(&began))
        usleep(1000);
    double t0 = now_s();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        exit(7);
    int st = wait_child(pid, 30);
    double took = now_s() - t0;
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 7, "status %#x", st);
    ck_assert_msg(took < 5, "the child's exit took %.1f s", took);
    pthread_detach(th); /* it stops at its wait; the test process ends */
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        {"a signal sent to a held thread comes when its hold ends",
         held_until_the_hold_ends},
        {"a held thread takes a signal while it waits in fr_hold_poll",
         taken_while_the_holder_waits},
        {"a signal during a long fr_hold_poll ends the wait",
         a_signal_during_a_wait_ends_it},
        {"the thread's mask is put back; faults are never held",
         the_mask_is_put_back},
        {"exit() from another thread waits for the held thread's wait",
         exit_waits_for_a_held_thread_to_wait},
        {"exit() from another thread waits for the held thread's end",
         exit_waits_for_a_held_thread_to_end_its_hold},
        {"exit() on a held thread does not wait for that thread",
         a_held_thread_that_exits_is_not_waited_for},
        {"the exiting thread may hold in a later exit handler",
         the_exiting_thread_may_hold_in_an_exit_handler},
        {"a fork child's exit does not wait for the parent's held thread",
         a_fork_child_does_not_wait_for_the_parents_held_thread},
    };
    return fr_run_tests("signal_hold", tests, sizeof(tests) / sizeof(tests[0]),
                        60);
}
