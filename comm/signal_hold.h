/*
 * Asynchronous signals held off on a thread while it sets fabrpc up, and
 * let in only while it waits.
 *
 * A handler that calls exit() (what many programs do on SIGTERM or
 * SIGINT) runs exit's handlers and libfabric's destructor on the thread
 * it interrupted. Where that thread was inside libfabric (its init lock,
 * shm's endpoint list), inside malloc or holding a lock of ours, the
 * process hung until SIGKILL; mpirun and torchrun send none. frpc_init
 * takes libfabric's providers, endpoints and regions on the caller's
 * thread, so that thread holds the asynchronous signals (threads.h) off
 * for the whole of frpc_init, except while it waits for the other ranks
 * (fr_hold_poll): there it holds no lock and is in no library, and a
 * signal, held or new, is taken at once. Faults, traps and abort stay
 * deliverable: they are the thread's own.
 *
 * A signal sent to the process may go to another of the program's
 * threads, whose exit() would run libfabric's destructor while the held
 * thread is inside libfabric: an exit handler waits (bounded) until no
 * held thread is busy, and a held thread that finds the process exiting
 * stops there for good instead of going back into a library being torn
 * down.
 */
#ifndef FR_COMM_SIGNAL_HOLD_H
#define FR_COMM_SIGNAL_HOLD_H

#include <poll.h>

/* Holds the asynchronous signals off on this thread until the matching
 * fr_hold_end. Nests: only the outermost pair changes the mask. Never
 * blocks; if the process is exiting, never returns (see above). */
void fr_hold_begin(void);

/* Ends fr_hold_begin: on the outermost one the thread's mask is put back,
 * and a signal that came meanwhile is delivered now. If the process is
 * exiting, never returns. */
void fr_hold_end(void);

/* poll(p, n, timeout_ms) (p may be NULL with n 0: a sleep). On a thread
 * inside fr_hold_begin, the signals it held are let in for the wait
 * (ppoll with the mask the hold replaced): a handler may run during it,
 * and then poll returns -1 with EINTR, as poll does. Same returns as
 * poll; blocks up to timeout_ms (-1: no limit). */
int fr_hold_poll(struct pollfd *p, nfds_t n, int timeout_ms);

#endif /* FR_COMM_SIGNAL_HOLD_H */
