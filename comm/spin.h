/*
 * A lock for a few instructions of bookkeeping on the fast path.
 *
 * A pthread mutex pair is two atomic steps and about 55 instructions; an
 * 8-byte get took two such pairs for the ledger alone (ledger.c). This
 * lock is one exchange to take and a plain release store to give: a
 * pair is one atomic step and a handful of instructions. Only for
 * sections that never block or call out: its waiter spins, and yields
 * the CPU every 64 looks so that a holder preempted on a machine with
 * more threads than cores gets to run (two cores, four ranks).
 */
#ifndef FR_COMM_SPIN_H
#define FR_COMM_SPIN_H

#include <sched.h>
#include <stdatomic.h>

typedef struct fr_spin {
    atomic_int held;
} fr_spin;

static inline void fr_spin_init(fr_spin *s)
{
    atomic_init(&s->held, 0);
}

static inline void fr_spin_lock(fr_spin *s)
{
    unsigned looks = 0;
    while (atomic_exchange_explicit(&s->held, 1, memory_order_acquire)) {
        /* Wait with loads (no writes to the line) until it looks free. */
        while (atomic_load_explicit(&s->held, memory_order_relaxed))
            if (++looks % 64 == 0)
                sched_yield();
#if defined(__x86_64__) || defined(__i386__)
            else
                __builtin_ia32_pause();
#endif
    }
}

static inline void fr_spin_unlock(fr_spin *s)
{
    atomic_store_explicit(&s->held, 0, memory_order_release);
}

#endif
