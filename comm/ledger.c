/*
 * Which one-sided operation a context-less error report belongs to.
 *
 * shm in libfabric 1.17 copies a one-sided read or write while it is
 * posted (process_vm_readv/writev, see rma_by_initiator), and writes its
 * completion then and there. When the copy fails (the owner unmapped the
 * memory a stale descriptor names), the post still returns 0, and the
 * report it writes carries no context: the transfer never completed, its
 * local region stayed busy, and a get without a timeout waited for ever.
 *
 * Every operation posted that way yields exactly one report: a completion
 * naming it, or such an error. So the ledger lists them, each added
 * before its post and dropped at its completion (or a failed post), and
 * counts the errors naming none. Once no more are listed than errors
 * counted, every one still listed has had its report read, and none was
 * a completion: they are the ones that failed. An operation the provider
 * completes later rather than while posting (its slow path) only delays
 * that moment, never changes the verdict.
 *
 * Its lock is a spin lock (spin.h): every section here is a few links
 * and counts, and an 8-byte get takes it twice.
 */
#include "config.h"

#include "comm/fabric_internal.h"

void fr__ledger_add(fr_fabric *f, fr_op *op)
{
    fr_spin_lock(&f->led_lock);
    op->led_prev = NULL;
    op->led_next = f->led_head;
    if (f->led_head)
        f->led_head->led_prev = op;
    f->led_head = op;
    op->on_ledger = 1;
    f->led_n++;
    fr_spin_unlock(&f->led_lock);
}

static void unlink_op(fr_fabric *f, fr_op *op)
{
    if (op->led_prev)
        op->led_prev->led_next = op->led_next;
    else
        f->led_head = op->led_next;
    if (op->led_next)
        op->led_next->led_prev = op->led_prev;
    op->on_ledger = 0;
    f->led_n--;
}

void fr__ledger_drop(fr_fabric *f, fr_op *op)
{
    fr_spin_lock(&f->led_lock);
    if (op->on_ledger)
        unlink_op(f, op);
    fr_spin_unlock(&f->led_lock);
}

int fr__ledger_error(fr_fabric *f)
{
    int taken = 0;
    fr_spin_lock(&f->led_lock);
    if (f->led_n > atomic_load(&f->led_errs)) {
        atomic_fetch_add(&f->led_errs, 1);
        taken = 1;
    }
    fr_spin_unlock(&f->led_lock);
    return taken;
}

fr_op *fr__ledger_failed(fr_fabric *f)
{
    fr_op *failed = NULL;
    fr_spin_lock(&f->led_lock);
    if (f->led_n <= atomic_load(&f->led_errs)) {
        failed = f->led_head;
        for (fr_op *op = failed; op; op = op->led_next)
            op->on_ledger = 0;
        f->led_head = NULL;
        f->led_n = 0;
        atomic_store(&f->led_errs, 0);
    }
    fr_spin_unlock(&f->led_lock);
    return failed;
}
