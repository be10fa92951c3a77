/*
 * Threads fabrpc starts, and the signals they leave to the program.
 *
 * A signal sent to the process (kill, a terminal's Ctrl-C, a launcher's
 * SIGTERM) goes to any one thread that does not block it. Delivered to a
 * fabrpc thread in the middle of libfabric, a program's handler that
 * calls exit() (common on SIGTERM) ran libfabric's destructor under locks
 * that very thread held, and the process never ended. So fabrpc's threads
 * block the asynchronous signals: the program's own threads take them.
 * Signals a thread raises itself (faults, traps, abort) stay deliverable:
 * they are its own and cannot wait.
 */
#ifndef FR_COMM_THREADS_H
#define FR_COMM_THREADS_H

#include <pthread.h>
#include <signal.h>

#include "comm/clock.h" /* FR_TLS_FAST */

/* Fills set with every signal but those a thread raises itself (SIGSEGV,
 * SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGABRT, SIGPIPE). */
void fr_async_signals(sigset_t *set);

/* pthread_create(t, NULL, fn, arg) for a thread that blocks
 * fr_async_signals from its start; the calling thread's mask is left as
 * it was. Returns pthread_create's code (0 or an errno value). */
int fr_thread_create(pthread_t *t, void *(*fn)(void *), void *arg);

/* Set when this thread may have woken a sleeping thread (a doorbell ring
 * that woke a peer, a condition signalled for a sleeping waiter, any
 * message sent over a provider without a doorbell, whose receiver the
 * kernel wakes from within the send); the next empty poll of a spin
 * yields the CPU once and clears it (rpc/progress.c). The scheduler may
 * queue the woken thread on this very CPU, where it waited out the
 * whole spin window (200 us): perf trace showed a callee's futex return
 * 250 us after the ring. */
extern _Thread_local int fr_woke_sleeper FR_TLS_FAST;

#endif /* FR_COMM_THREADS_H */
