/*
 * Lost peers: learning that a rank is gone, marking it once, and telling
 * the application.
 *
 * Design notes (the invariant): a rank is marked lost at most once, in
 * fr_agent_mark_lost, whoever noticed: the first mark wins a
 * compare-and-swap on its slot, and only the winner acts. From the
 * winner's mark on, every call to that rank ends with FRPC_EPEERLOST:
 * calls in the pending table are failed by it, and a new call checks the
 * slot after its entry is in the table (call.c), so one of the two always
 * sees the other.
 *
 * Who notices, cheapest first:
 * - the provider: a refused or reset connection (the fabric's
 *   on_peer_unreachable, on the polling thread);
 * - the machine: a peer on this host (same boot, same pid namespace) is
 *   watched through a pidfd, readable the moment its process ends. An
 *   ended process may have left (frpc_shutdown, then exit): only the
 *   store knows, and its notice can come after the pidfd's. So while the
 *   store serves, the pidfd's verdict waits up to FR_EXIT_GRACE_MS for
 *   the store's (LEFT or DEAD: its connection closed with the process);
 *   for rank 0, the store's own process, until the watcher has read what
 *   the store sent before it closed; without the store (rank 0 dead, or
 *   its connection broken) it is DEAD at once; rank 0 having left does
 *   not count, since it serves the store until the others have left;
 * - the bootstrap store: rank 0's store sees each rank's own connection
 *   close; one that closes without LEAVE is a death, and the store tells
 *   every rank through a second, WATCH connection (a watcher thread
 *   blocks on it). If that connection itself breaks, rank 0 (the store's
 *   process) is gone.
 * A liveness thread sleeps in poll(2) on the pidfds and an eventfd; it
 * also runs the application's frpc_on_peer_lost function, so that never
 * runs on a polling thread (which must not block) nor with a lock held.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "comm/threads.h"
#include "comm/fault.h"
#include "comm/shm_repair.h"
#include "rpc/agent.h"

/* A watcher's wait has no limit: stopping interrupts it
 * (fr_store_interrupt). A WATCH parked at the store is how its last
 * events reach a rank stopped meanwhile: with 2 s slices, a rank stopped
 * longer had none parked when rank 0 left (its goodbye behind a stopped
 * rank's data over tcp), and, resumed, found the store closed and took
 * rank 0 for dead. */
#define FR_WATCH_NO_LIMIT 0
/* How long a peer whose process ended waits for the store to say whether
 * it left before it is taken for dead (see the design notes): the store
 * learns it from the same exit, within milliseconds. */
#define FR_EXIT_GRACE_MS 2000
/* The goodbye's function. Not under FR_RESERVED_PREFIX: 1.0 sent it by
 * this name, so it stays, and fabrpc.h names it as taken. */
#define FR_BYE_FN "fabrpc.internal.bye"
/* Its announcement while the store still serves (see "goodbyes"); a
 * rank of 1.3 or older answers FRPC_ENOFUNC, and nothing changes. */
#define FR_LEAVING_FN FR_RESERVED_PREFIX "leaving"

int fr_name_reserved(const char *name)
{
    /* Every call asks: one byte settles almost all names. */
    if (name[0] != FR_RESERVED_PREFIX[0] && name[0] != FR_BYE_FN[0])
        return 0;
    return strncmp(name, FR_RESERVED_PREFIX, strlen(FR_RESERVED_PREFIX)) ==
               0 ||
           strcmp(name, FR_BYE_FN) == 0;
}
/* A leaving rank's goodbye to each rank, at most (see
 * fr_liveness_say_goodbye_by). */
#define FR_BYE_MS 500

/* How long a request whose send failed with a plain transport error
 * waits to learn whether its peer died (then it ends FRPC_EPEERLOST, like
 * every call to a lost rank) before it ends FRPC_ETRANSPORT: a dying
 * peer's connection may fail before its death is seen (the store's
 * notice takes milliseconds). */
#define FR_SUSPECT_MS 1000

typedef struct fr_suspect {
    struct fr_suspect *next;
    uint64_t id;
    uint32_t dst;
    int status;       /* its end unless dst is found lost */
    uint64_t due_ns;
    char msg[128];
} fr_suspect;

typedef struct fr_loss {
    struct fr_loss *next; /* the report queue */
    int queued;           /* on the queue, or reported (under lock) */
    int cleaned;          /* its shm leftovers seen to (liveness thread) */
    /* The fabric was told and the calls ended: at the mark, or for a
     * goodbye (parted) when its process's end is noticed. */
    atomic_int ended;
    int parted;
    uint32_t rank;
    int state;
    /* The order losses were found in (1 first; 0 until its mark sets
     * it, after the slot's). */
    atomic_uint_fast64_t seq;
    char why[192];
} fr_loss;

struct fr_liveness {
    _Atomic(fr_loss *) *slot; /* per rank: NULL while alive; owned */
    uint32_t world;

    pthread_mutex_t lock; /* the queue and the application's function */
    fr_loss *queue_head, **queue_tail;
    frpc_peer_fn fn;
    void *fn_user;
    int replay; /* report every loss so far again (a new fn was set) */
    /* A report in fn, and the fn_gen it began under: frpc_on_peer_lost
     * waits (on idle) for one that began with the fn it replaced. */
    uint64_t fn_gen, running_gen;
    int running;
    int report_waits; /* the running report waits in a call (fr_progress) */
    pthread_cond_t idle;
    atomic_uint_fast64_t next_seq; /* fr_loss.seq of the next loss */
    atomic_int bye_said; /* fr_liveness_say_goodbye_by went to the others */
    fr_suspect *suspects; /* fr_liveness_suspect's, under lock */

    int efd;   /* wakes the liveness thread */
    int *pidfd; /* per rank, -1 when not watched */
    uint64_t *exit_due; /* per rank: its process ended; DEAD at this time
                         * unless the store speaks first (0: none) */
    unsigned char *same_host; /* per rank, from fr_liveness_set_peers */
    int *pid;                 /* per rank, from fr_liveness_set_peers */
    atomic_uchar *said_bye;   /* per rank: its goodbye call came in */
    atomic_uint_fast64_t byes_heard; /* goodbyes and announcements so far */
    fr_store_client *watch;
    pthread_t thread, watcher;
    int thread_started, watcher_started;
    /* The threads wait here until fr_liveness_open (under lock): made
     * before frpc_init's last meeting, so that a rank that cannot make
     * them fails with the others; watching only once init succeeded. */
    pthread_cond_t gate;
    int open;
    atomic_int stop;
    atomic_int reported_shutdown; /* fr_liveness_report_lost: once */
    atomic_int store_gone; /* the watch connection broke (watcher) */
};

/* The liveness whose report this thread runs (fn may set a new fn: it
 * must not wait for itself). */
static _Thread_local const fr_liveness *reporting FR_TLS_FAST;
/* The liveness thread's own l, on it (NULL elsewhere): a mark there
 * repairs at once (mark). */
static _Thread_local const fr_liveness *watching FR_TLS_FAST;

static void wake(fr_liveness *l)
{
    uint64_t one = 1;
    if (l->efd >= 0 && write(l->efd, &one, sizeof(one)) < 0) {
        /* the counter is saturated: the thread is awake already */
    }
}

const char *fr_agent_peer_lost_why(const frpc_agent *a, uint32_t rank)
{
    fr_liveness *l = a->live;
    if (!l || rank >= l->world)
        return NULL;
    fr_loss *x = atomic_load(&l->slot[rank]);
    return x ? x->why : NULL;
}

/* A rank that left answered what it answered before it left: those
 * answers may still sit in our completion queue when its leaving is
 * learnt (from the store, a faster path). Taken before the fabric drops
 * its frames. */
#define FR_LEFT_SETTLE_MS 200

/* What a settle for a leaving rank waits for: its answers to our calls,
 * each one taking a call out of the table. */
typedef struct {
    frpc_agent *a;
    uint32_t rank;
} fr_calls_to;

static uint64_t calls_to_left(void *ctx)
{
    fr_calls_to *c = ctx;
    return fr_pending_ids_to(&c->a->pend, c->rank, NULL, 0);
}

/* Tells the fabric and ends the calls to x's rank, once. */
static void end_calls(frpc_agent *a, fr_loss *x)
{
    if (atomic_exchange(&x->ended, 1))
        return;
    /* Only with calls to it in flight (settle waits for a quiet spell:
     * ranks that leave one by one would each cost it). */
    if (a->fab && x->state == FRPC_PEER_LEFT &&
        fr_pending_ids_to(&a->pend, x->rank, NULL, 0) > 0) {
        fr_calls_to c = {a, x->rank};
        fr_fabric_peer_departing(a->fab, x->rank);
        fr_fabric_settle(a->fab, fr_deadline_ms(FR_LEFT_SETTLE_MS),
                         calls_to_left, &c);
    }
    if (a->fab)
        fr_fabric_peer_lost(a->fab, x->rank);
    fr_pending_fail(&a->pend, x->rank, FRPC_EPEERLOST, x->why);
}

static void clean_after(frpc_agent *a, fr_loss *x);

/* parted: the rank said goodbye and may still be running (see on_bye). */
static void mark(frpc_agent *a, uint32_t rank, int state, const char *why,
                 int parted)
{
    fr_liveness *l = a->live;
    fr_loss *x, *none = NULL;

    if (!l || rank >= l->world || rank == (uint32_t)a->set.rank)
        return;
    if ((x = atomic_load(&l->slot[rank]))) {
        if (!parted && x->parted)
            end_calls(a, x); /* a goodbye, then its end */
        return; /* marked already: the cheap common case */
    }
    if (state == FRPC_PEER_DEAD && atomic_load(&l->said_bye[rank])) {
        /* Its end, however seen (pidfd, reset connection), follows the
         * goodbye it sent: it left. */
        state = FRPC_PEER_LEFT;
        why = "left the job (frpc_shutdown)";
    }
    if (!(x = calloc(1, sizeof(*x))))
        return; /* the next notice marks it; calls end by their timeout */
    x->rank = rank;
    x->state = state;
    x->parted = parted;
    snprintf(x->why, sizeof(x->why), "rank %u %s", rank,
             why && *why ? why : (state == FRPC_PEER_LEFT ? "left the job"
                                                          : "died"));
    /* Its names go before anyone can read it DEAD: a rank that sees it
     * dead and exits at once would otherwise leave them (clean_after may
     * come later, or watch a lock for a while first). The repair finds a
     * region whose name is gone among our own mappings. */
    if (state == FRPC_PEER_DEAD && a->bell && l->same_host &&
        l->same_host[rank])
        fr_agent_unlink_names_of(a, rank);
    if (!atomic_compare_exchange_strong(&l->slot[rank], &none, x)) {
        free(x);
        if (!parted)
            mark(a, rank, state, why, 0); /* lost the race to a goodbye */
        return;
    }
    /* A dead rank of this host may have held a shm lock that a thread of
     * ours now spins on inside the provider, holding the fabric's locks
     * that ending its calls takes: the repair (clean_after, on the
     * liveness thread) comes first. Woken only after, the liveness
     * thread slept on until the pidfd's grace ran out (a survivor told
     * of a death 2 s late; on the liveness thread, it could never come). */
    if (state == FRPC_PEER_DEAD) {
        if (watching == l)
            clean_after(a, x);
        else
            wake(l);
    }
    if (parted) /* the fabric stays open to it for goodbyes */
        fr_pending_fail(&a->pend, rank, FRPC_EPEERLOST, x->why);
    else
        end_calls(a, x);
    /* Numbered only once its calls ended: a replay (a new fn set
     * meanwhile) reports numbered losses only, so none is reported while
     * calls to it may still run; this one is queued just below. */
    atomic_store(&x->seq, atomic_fetch_add(&l->next_seq, 1) + 1);
    pthread_mutex_lock(&l->lock);
    if (!x->queued) { /* a replay may have queued it already */
        x->queued = 1; /* the slot keeps owning it */
        *l->queue_tail = x;
        l->queue_tail = &x->next;
    }
    pthread_mutex_unlock(&l->lock);
    wake(l);
}

void fr_agent_mark_lost(frpc_agent *a, uint32_t rank, int state,
                        const char *why)
{
    mark(a, rank, state, why, 0);
}

void fr_agent_on_peer_unreachable(void *ctx, uint32_t rank, const char *why)
{
    char buf[160];
    snprintf(buf, sizeof(buf), "cannot be reached any more (%s)",
             why ? why : "the provider says so");
    fr_agent_mark_lost(ctx, rank, FRPC_PEER_DEAD, buf);
}

const char *fr_agent_call_refused_why(const frpc_agent *a, uint32_t rank,
                                      const char *fname)
{
    fr_liveness *l = a->live;
    fr_loss *x = l && rank < l->world ? atomic_load(&l->slot[rank]) : NULL;
    if (!x)
        return NULL;
    if (x->parted && !atomic_load(&x->ended) && fname &&
        strcmp(fname, FR_BYE_FN) == 0)
        return NULL;
    return x->why;
}

int frpc_peer_state(const frpc_agent *a, int rank)
{
    if (!a)
        return FRPC_EINVAL;
    if (rank < 0 || rank >= a->set.world)
        return FRPC_ENORANK;
    fr_loss *x = a->live ? atomic_load(&a->live->slot[rank]) : NULL;
    return x ? x->state : FRPC_PEER_ALIVE;
}

void fr_liveness_report_waits(frpc_agent *a, int delta)
{
    fr_liveness *l = a->live;
    if (!l || reporting != l)
        return;
    pthread_mutex_lock(&l->lock);
    l->report_waits += delta;
    pthread_cond_broadcast(&l->idle); /* a setter may have to give up */
    pthread_mutex_unlock(&l->lock);
}

/* Under l->lock: 1 if this thread, waiting for the running report, could
 * be what the report waits for: it waits in a call, and this thread runs
 * the agent's handlers (the call's own, perhaps), which nobody would run
 * meanwhile. */
static int waiting_could_deadlock(frpc_agent *a, const fr_liveness *l)
{
    return l->report_waits > 0 &&
           fr_agent_runs_handlers(a);
}

int frpc_on_peer_lost(frpc_agent *a, frpc_peer_fn fn, void *user)
{
    if (!a || !a->live)
        return FRPC_EINVAL;
    fr_agent_enter(a); /* a shutdown on another thread frees l after us */
    fr_liveness *l = a->live;
    int rc = 0;
    pthread_mutex_lock(&l->lock);
    frpc_peer_fn old_fn = l->fn;
    void *old_user = l->fn_user;
    int old_replay = l->replay;
    l->fn = fn;
    l->fn_user = user;
    l->replay = fn != NULL;
    uint64_t gen = ++l->fn_gen;
    /* A report still running the old fn: once we return, the caller may
     * free what its user points to. Not our own run, from inside fn. The
     * liveness thread is in that report meanwhile, so giving up leaves
     * nothing of the new fn behind (unless another thread has set one
     * since: then ours is gone already). */
    while (l->running && l->running_gen != l->fn_gen && reporting != l) {
        if (waiting_could_deadlock(a, l)) {
            if (l->fn_gen == gen) {
                l->fn = old_fn;
                l->fn_user = old_user;
                l->replay = old_replay;
                l->fn_gen--;
            }
            rc = FRPC_EDEADLK;
            break;
        }
        pthread_cond_wait(&l->idle, &l->lock);
    }
    pthread_mutex_unlock(&l->lock);
    if (rc)
        fprintf(stderr, "fabrpc: rank %d: frpc_on_peer_lost from a handler "
                "or callback while the peer-lost report waits in a call: "
                "FRPC_EDEADLK (the report may wait for this very handler; "
                "set the function from another thread)\n", a->set.rank);
    else
        wake(l);
    fr_agent_leave(a);
    return rc;
}

/* ---- goodbyes ------------------------------------------------------ */

/* A rank that leaves says so through the store (LEAVE). Once rank 0 and
 * its store are gone it says so itself, with a call to every rank
 * (FR_BYE_FN): otherwise the others, seeing its process end, would take
 * it for dead. A rank whose shutdown barrier failed, rank 0 included,
 * announces its leaving (FR_LEAVING_FN) while the store is still up: a
 * rank that missed the barrier may be stopped, and resume once the store,
 * and the LEAVEs it held, are gone. The announcement waits in its queue,
 * and is delivered before any verdict of death no store can contradict
 * (deliver_goodbyes). It only notes the leaving: it comes before the
 * sender's last answers, which must not find their calls ended (the
 * store's LEAVE, after them, ends the calls). */

/* Notes that req's source leaves, answers it, and returns the source.
 * The note comes first: the source may end its process the moment it
 * has the answer, and the liveness thread must then know the end was a
 * goodbye, not a death. */
static uint32_t note_leaving(frpc_agent *a, frpc_request *req)
{
    uint32_t src = (uint32_t)frpc_request_source(req);
    if (src < a->live->world)
        atomic_store(&a->live->said_bye[src], 1);
    atomic_fetch_add(&a->live->byes_heard, 1);
    frpc_respond(req, NULL, 0);
    return src;
}

static void on_bye(frpc_request *req, void *user)
{
    frpc_agent *a = user;
    /* The answer goes before the mark: once src is lost, nothing goes
     * to it. */
    uint32_t src = note_leaving(a, req);
    /* src is LEFT, but it still runs its shutdown and watches us: ours
     * must still reach it (fr_agent_call_refused_why), or it would see
     * our end as a death. Its own end closes the fabric to it. */
    mark(a, src, FRPC_PEER_LEFT, "left the job (frpc_shutdown)", 1);
}

static void on_leaving(frpc_request *req, void *user)
{
    note_leaving(user, req);
}

int fr_liveness_register(frpc_agent *a)
{
    int rc = frpc_register(a, FR_BYE_FN, on_bye, a, FRPC_INLINE);
    return rc ? rc : fr_registry_add(&a->reg, fr_func_id(FR_LEAVING_FN),
                                     FR_LEAVING_FN, on_leaving, a,
                                     FRPC_INLINE);
}

/* Says goodbye once, if rank 0 is lost (FR_BYE_FN), or announces the
 * leaving if unheard (FR_LEAVING_FN), waiting until deadline and at most
 * FR_BYE_MS. */
void fr_liveness_say_goodbye_by(frpc_agent *a, uint64_t deadline,
                                int unheard)
{
    int world = a->set.world, n = 0;
    uint64_t now = fr_now_ns(), cap = fr_deadline_ms(FR_BYE_MS);
    frpc_future **f;
    int bye = a->set.rank != 0 && fr_agent_peer_lost_why(a, 0);
    const char *fn = bye ? FR_BYE_FN : FR_LEAVING_FN;
    if (world == 1 || atomic_load(&a->live->bye_said) || (!bye && !unheard))
        return;
    if (deadline > cap)
        deadline = cap;
    /* At least 1 ms: a deadline passed still sends (the wait is what is
     * bounded). */
    int ms = deadline > now ? (int)((deadline - now) / 1000000) : 0;
    ms = ms > 0 ? ms : 1;
    if (!(f = calloc((size_t)world, sizeof(*f))))
        return;
    atomic_store(&a->live->bye_said, 1);
    int was = fr_call_own_names(1), was_unlimited = fr_pending_unlimited(1);
    for (int r = 0; r < world; r++)
        if (r != a->set.rank &&
            !fr_agent_call_refused_why(a, (uint32_t)r, fn) &&
            frpc_call_async(a, r, fn, NULL, 0, ms, &f[n]) == 0)
            n++;
    fr_pending_unlimited(was_unlimited);
    fr_call_own_names(was);
    frpc_wait_all(f, (size_t)n, ms);
    for (int i = 0; i < n; i++)
        frpc_future_free(f[i]);
    free(f);
}

/* ---- requests whose send failed ------------------------------------- */

void fr_liveness_suspect(frpc_agent *a, uint32_t dst, uint64_t id,
                         int status, const char *msg)
{
    fr_liveness *l = a->live;
    fr_suspect *s = l ? calloc(1, sizeof(*s)) : NULL;
    if (s) {
        s->id = id;
        s->dst = dst;
        s->status = status;
        s->due_ns = fr_deadline_ms(FR_SUSPECT_MS);
        snprintf(s->msg, sizeof(s->msg), "%s", msg);
        /* Queued only while liveness still looks, decided under the lock:
         * fr_liveness_stop sets stop before its last look takes it, so
         * that look finds s, or s ends here. (Decided before the lock, a
         * suspect could be queued after the last look, and looked at by
         * fr_liveness_destroy, after the pending table was gone.) */
        pthread_mutex_lock(&l->lock);
        int queued = !atomic_load(&l->stop);
        if (queued) {
            s->next = l->suspects;
            l->suspects = s;
        }
        pthread_mutex_unlock(&l->lock);
        if (queued) {
            wake(l);
            return;
        }
        free(s);
    }
    /* nobody to wait with: the error as it is */
    fr_pending_complete(&a->pend, id, dst, status, 0, NULL, 0, strdup(msg));
}

/* 1 if pidfd says its process ended; never blocks. */
static int pidfd_ended(int pidfd)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    return pidfd >= 0 && poll(&p, 1, 0) > 0;
}

/* How often a due suspect waiting for its peer's mark is looked at. */
#define FR_ENDING_LOOK_NS (20u * 1000000u)

/* 1 while dst's process has ended and its mark is still to come (the
 * store's word, within FR_EXIT_GRACE_MS): a suspect due then waits for
 * the mark. Without it, a transfer that shm's failed copy ended as the
 * owner died was called FRPC_EACCES when liveness was slower than a
 * second (run_peer_lost under TSan). Liveness thread only. */
static int ending(const fr_liveness *l, uint32_t dst)
{
    return l->exit_due[dst] != 0 || pidfd_ended(l->pidfd[dst]);
}

/* Ends the suspects that are due (all, with all set), or whose peer was
 * lost meanwhile: FRPC_EPEERLOST with the loss's words if it was (the
 * mark may not have failed the call yet), else their own status. One
 * due while its peer's process has ended waits for the mark.
 * Returns the time of the next due one, or UINT64_MAX. */
static uint64_t review_suspects(frpc_agent *a, int all)
{
    fr_liveness *l = a->live;
    fr_suspect *due = NULL, **p;
    uint64_t now = fr_now_ns(), next = UINT64_MAX;
    pthread_mutex_lock(&l->lock);
    for (p = &l->suspects; *p;) {
        fr_suspect *s = *p;
        if (all || atomic_load(&l->slot[s->dst]) ||
            (s->due_ns <= now && !ending(l, s->dst))) {
            *p = s->next;
            s->next = due;
            due = s;
        } else {
            /* Due and waiting for a mark: looked at again soon. */
            uint64_t when = s->due_ns > now ? s->due_ns
                                            : now + FR_ENDING_LOOK_NS;
            next = when < next ? when : next;
            p = &s->next;
        }
    }
    pthread_mutex_unlock(&l->lock);
    while (due) {
        fr_suspect *s = due;
        due = s->next;
        const char *lost = fr_agent_peer_lost_why(a, s->dst);
        /* A no-op for a call that ended meanwhile (lost peer, timeout). */
        fr_pending_complete(&a->pend, s->id, s->dst,
                            lost ? FRPC_EPEERLOST : s->status, 0, NULL,
                            0, strdup(lost ? lost : s->msg));
        free(s);
    }
    return next;
}

/* ---- the liveness thread ------------------------------------------- */

/* Runs the application's function for each loss queued (or, after a new
 * function was set, each loss so far), one at a time, without the lock. */
static void report(frpc_agent *a)
{
    fr_liveness *l = a->live;
    for (;;) {
        fr_loss *x = NULL;
        frpc_peer_fn fn;
        void *user;
        pthread_mutex_lock(&l->lock);
        if (l->replay) {
            /* Losses before fn was set: every marked slot, in the order
             * they were found (by seq; a loss marked but not yet numbered
             * is queued by its mark), then the queue is what came after. */
            l->replay = 0;
            l->queue_head = NULL;
            l->queue_tail = &l->queue_head;
            for (uint64_t prev = 0;;) {
                fr_loss *s = NULL;
                uint64_t least = 0;
                for (uint32_t r = 0; r < l->world; r++) {
                    fr_loss *t = atomic_load(&l->slot[r]);
                    uint64_t q = t ? atomic_load(&t->seq) : 0;
                    if (q > prev && (!s || q < least)) {
                        s = t;
                        least = q;
                    }
                }
                if (!s)
                    break;
                prev = least;
                s->queued = 1;
                s->next = NULL;
                *l->queue_tail = s;
                l->queue_tail = &s->next;
            }
        }
        if ((x = l->queue_head) && !(l->queue_head = x->next))
            l->queue_tail = &l->queue_head;
        fn = l->fn;
        user = l->fn_user;
        int run = x && fn && !atomic_load(&l->stop);
        if (run) { /* taken under the lock: frpc_on_peer_lost sees it */
            l->running = 1;
            l->running_gen = l->fn_gen;
        }
        pthread_mutex_unlock(&l->lock);
        if (!x)
            return;
        if (run) {
            fr_agent_mark_inside(a); /* fn may not shut a down */
            reporting = l;
            fn(a, (int)x->rank, x->state, x->why, user);
            reporting = NULL;
            fr_agent_unmark_inside();
            pthread_mutex_lock(&l->lock);
            l->running = 0;
            pthread_cond_broadcast(&l->idle);
            pthread_mutex_unlock(&l->lock);
        }
    }
}

/* What a dead shm peer on this host leaves: spin locks it held in the
 * regions of this host's ranks (threads sending to them would spin for
 * ever inside the provider: comm/shm_repair.h) and its own region, which
 * it cannot remove (our mapping of it, if any, stays valid). */
typedef struct {
    frpc_agent *a;
    uint32_t dead;
} clean_pids;

/* This host's live ranks and the one just dead: other lost ranks were
 * seen to when they died. */
static int cleaned_pid(void *ctx, uint32_t r)
{
    const clean_pids *c = ctx;
    fr_liveness *l = c->a->live;
    if (!l->same_host[r])
        return 0;
    if (r != c->dead && r != (uint32_t)c->a->set.rank &&
        atomic_load(&l->slot[r]))
        return 0;
    return l->pid[r];
}

static void clean_after(frpc_agent *a, fr_loss *x)
{
    fr_liveness *l = a->live;
    clean_pids ctx = {a, x->rank};
    fr_shm_regions reg;

    x->cleaned = 1;
    if (!a->bell || !l->same_host[x->rank])
        return;
    if (fr_shm_regions_make(a, cleaned_pid, &ctx, &reg) == 0) {
        fr_shm_repair_after(a->set.rank, x->rank, &reg);
        fr_shm_regions_free(&reg);
    }
    /* Its bell too: a rank killed in frpc_init's last moment had not
     * removed it yet. */
    fr_agent_unlink_names_of(a, x->rank);
}

static void clean_after_deaths(frpc_agent *a)
{
    fr_liveness *l = a->live;
    for (uint32_t r = 0; r < l->world; r++) {
        fr_loss *x = atomic_load(&l->slot[r]);
        if (x && !x->cleaned && x->state == FRPC_PEER_DEAD)
            clean_after(a, x);
    }
}

/* 1 when no store can say any more whether a rank left: its connection
 * broke, or rank 0, its process, died. Rank 0 having left is not that: it
 * serves the store until every rank has left it (leave_store, agent.c),
 * and taking its LEFT for silence made a rank that left after it, whose
 * pidfd beat the store's word, DEAD (run_peer_lost in CI). */
static int store_silent(frpc_agent *a)
{
    fr_liveness *l = a->live;
    fr_loss *x = atomic_load(&l->slot[0]);
    return atomic_load(&l->store_gone) || (x && x->state == FRPC_PEER_DEAD);
}

/* Before a verdict of death that no store can contradict: goodbyes that
 * came before it (this rank was stopped, say, while the others left and
 * the store closed) are delivered first, so that a rank that left is
 * LEFT (mark turns DEAD into LEFT after a goodbye). A moment's polling. */
static uint64_t byes_heard(void *ctx)
{
    fr_liveness *l = ctx;
    return atomic_load(&l->byes_heard);
}

static void deliver_goodbyes(frpc_agent *a)
{
    if (!atomic_load(&a->live->stop) && a->fab)
        fr_fabric_settle(a->fab, fr_deadline_ms(FR_BYE_MS), byes_heard,
                         a->live);
}

/* r's process ended (its pidfd): dead at once when no store can say
 * whether it left, else after the grace unless the store speaks first.
 * Rank 0 too: its store has closed with it, but what it said before
 * (rank 0's own LEAVE, pushed to our watch connection while this rank was
 * stopped, say) is still to be read, and the watcher's end of the
 * connection comes right after (store_gone: the grace ends then). */
static void exited(frpc_agent *a, uint32_t r)
{
    fr_liveness *l = a->live;
    if (!l->watcher_started || store_silent(a)) {
        deliver_goodbyes(a);
        fr_agent_mark_lost(a, r, FRPC_PEER_DEAD,
                           "died (its process ended, and no word of its "
                           "leaving reached this rank)");
        return;
    }
    l->exit_due[r] = fr_now_ns() + (uint64_t)FR_EXIT_GRACE_MS * 1000000u;
}

/* Ended processes the store has not spoken of within the grace (or whose
 * store is lost meanwhile): dead. A rank marked already stays as it is. */
static void exits_due(frpc_agent *a)
{
    fr_liveness *l = a->live;
    uint64_t now = fr_now_ns();
    int store_lost = store_silent(a);
    for (uint32_t r = 0; r < l->world; r++)
        if (l->exit_due[r] && (now >= l->exit_due[r] || store_lost)) {
            l->exit_due[r] = 0;
            fr_agent_mark_lost(a, r, FRPC_PEER_DEAD,
                               "died (its process ended without "
                               "frpc_shutdown; the store said nothing of "
                               "it)");
        }
}

void fr_liveness_reap_ended(frpc_agent *a)
{
    fr_liveness *l = a->live;
    if (!l || l->thread_started)
        return; /* the thread's own job while it runs */
    for (uint32_t r = 0; r < l->world; r++) {
        if (!l->exit_due[r] && !pidfd_ended(l->pidfd[r]))
            continue;
        l->exit_due[r] = 0; /* no store will speak of it any more */
        if (l->pidfd[r] >= 0)
            close(l->pidfd[r]);
        l->pidfd[r] = -1;
        fr_agent_mark_lost(a, r, FRPC_PEER_DEAD,
                           "died (its process ended while this rank shut "
                           "down)");
    }
}

/* Until fr_liveness_open, or the stop of an init that failed. */
static void wait_at_gate(fr_liveness *l)
{
    pthread_mutex_lock(&l->lock);
    while (!l->open && !atomic_load(&l->stop))
        pthread_cond_wait(&l->gate, &l->lock);
    pthread_mutex_unlock(&l->lock);
}

static void *liveness_main(void *arg)
{
    frpc_agent *a = arg;
    fr_liveness *l = a->live;
    wait_at_gate(l);
    watching = l;
    struct pollfd *p = calloc(l->world + 1, sizeof(*p));
    uint32_t *who = calloc(l->world + 1, sizeof(*who));

    uint64_t next_due = UINT64_MAX;
    while (p && who && !atomic_load(&l->stop)) {
        nfds_t n = 0;
        int wait_ms = -1;
        for (uint32_t r = 0; r < l->world; r++)
            if (l->exit_due[r] && l->exit_due[r] < next_due)
                next_due = l->exit_due[r];
        if (next_due != UINT64_MAX) {
            uint64_t now = fr_now_ns();
            wait_ms = next_due <= now ? 0
                                      : (int)((next_due - now) / 1000000 + 1);
        }
        p[n++] = (struct pollfd){.fd = l->efd, .events = POLLIN};
        for (uint32_t r = 0; r < l->world; r++)
            if (l->pidfd[r] >= 0) {
                who[n] = r;
                p[n++] = (struct pollfd){.fd = l->pidfd[r], .events = POLLIN};
            }
        if (poll(p, n, wait_ms) < 0 && errno != EINTR)
            break;
        if (p[0].revents) {
            uint64_t v;
            if (read(l->efd, &v, sizeof(v)) < 0) {
                /* EAGAIN: nothing new */
            }
        }
        for (nfds_t i = 1; i < n; i++)
            if (p[i].revents) {
                uint32_t r = who[i];
                close(l->pidfd[r]);
                l->pidfd[r] = -1;
                exited(a, r);
            }
        exits_due(a);
        clean_after_deaths(a);
        report(a);
        next_due = review_suspects(a, 0);
    }
    free(p);
    free(who);
    return NULL;
}

/* ---- the store's events -------------------------------------------- */

/* Why rank 0 is lost, from how its store's connection ended: a
 * keepalive that timed out (its host, or the network), a reset (the
 * store took this rank for lost while the network was cut, and drops it
 * now that it is back; or rank 0 died with bytes unread), or a close. */
static const char *store_loss_why(const fr_store_client *watch)
{
    const char *e = fr_store_last_error(watch);
    if (strstr(e, strerror(ETIMEDOUT)))
        return "unreachable: the connection to the bootstrap store it "
               "served timed out (its host down, or the network to it "
               "cut?)";
    if (strstr(e, strerror(ECONNRESET)))
        return "unreachable or dead: the bootstrap store it served reset "
               "the connection (after a network cut, rank 0 takes this "
               "rank for lost and drops it)";
    return "died (the bootstrap store it served closed)";
}

static void *watcher_main(void *arg)
{
    frpc_agent *a = arg;
    fr_liveness *l = a->live;
    wait_at_gate(l);
    uint64_t seen = 0;
    fr_store_event *ev = calloc(l->world, sizeof(*ev));

    while (ev && !atomic_load(&l->stop)) {
        size_t n = 0;
        uint64_t total = 0;
        int rc = fr_store_watch(l->watch, seen, FR_WATCH_NO_LIMIT, ev,
                                l->world, &n, &total);
        if (rc == FRPC_ETIMEDOUT)
            continue;
        if (rc) {
            /* The store's process is rank 0: its connection breaking
             * means rank 0 is gone (unless we are the ones stopping).
             * Goodbyes that came meanwhile (this rank was stopped, say)
             * are delivered first, so that ranks that left are not taken
             * for dead by this verdict or by their processes' end. */
            deliver_goodbyes(a);
            if (!atomic_load(&l->stop)) {
                atomic_store(&l->store_gone, 1);
                wake(l); /* exits waiting for the store's word: dead now */
            }
            if (!atomic_load(&l->stop) && a->set.rank != 0)
                fr_agent_mark_lost(a, 0, FRPC_PEER_DEAD,
                                   store_loss_why(l->watch));
            break;
        }
        /* ev holds events seen .. total - 1, all new */
        for (size_t i = 0; i < n; i++) {
            char why[160];
            if (ev[i].rank < 0)
                continue;
            if (ev[i].state == FR_STORE_LEFT)
                snprintf(why, sizeof(why), "left the job (frpc_shutdown)");
            else
                snprintf(why, sizeof(why), "died: %s", ev[i].reason);
            fr_agent_mark_lost(a, (uint32_t)ev[i].rank,
                               ev[i].state == FR_STORE_LEFT ? FRPC_PEER_LEFT
                                                            : FRPC_PEER_DEAD,
                               why);
        }
        seen = total;
    }
    free(ev);
    return NULL;
}

/* ---- life ---------------------------------------------------------- */

int fr_liveness_create(frpc_agent *a)
{
    fr_liveness *l = calloc(1, sizeof(*l));
    uint32_t world = (uint32_t)a->set.world;
    if (!l)
        return FRPC_ENOMEM;
    l->world = world;
    l->efd = -1;
    l->queue_tail = &l->queue_head;
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->idle, NULL);
    pthread_cond_init(&l->gate, NULL);
    l->slot = calloc(world, sizeof(*l->slot));
    l->pidfd = malloc(world * sizeof(*l->pidfd));
    l->exit_due = calloc(world, sizeof(*l->exit_due));
    l->same_host = calloc(world, 1);
    l->pid = calloc(world, sizeof(*l->pid));
    l->said_bye = calloc(world, sizeof(*l->said_bye));
    a->live = l;
    if (!l->slot || !l->pidfd || !l->exit_due || !l->same_host || !l->pid ||
        !l->said_bye)
        return FRPC_ENOMEM;
    for (uint32_t r = 0; r < world; r++)
        l->pidfd[r] = -1;
    l->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return l->efd < 0 ? FRPC_ENOMEM : 0;
}

void fr_liveness_set_peers(frpc_agent *a, const fr_peer_info *peers)
{
    for (uint32_t r = 0; r < a->live->world; r++) {
        a->live->same_host[r] = (unsigned char)peers[r].same_host;
        a->live->pid[r] = peers[r].pid;
    }
}

int fr_pidfd_open(int pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1; /* older kernels' headers: the store alone watches */
#endif
}

void fr_processes_ended(const int *pid, size_t n, int wait_ms,
                        unsigned char *ended)
{
    struct pollfd *p = calloc(n ? n : 1, sizeof(*p));
    size_t *which = calloc(n ? n : 1, sizeof(*which));
    size_t open = 0;
    for (size_t i = 0; i < n; i++) {
        ended[i] = 0;
        if (pid[i] <= 0)
            continue;
        int fd = fr_pidfd_open(pid[i]);
        if (fd < 0) { /* ESRCH: gone and reaped */
            ended[i] = errno == ESRCH ||
                       (kill(pid[i], 0) != 0 && errno == ESRCH);
            continue;
        }
        if (!p || !which) {
            close(fd);
            continue;
        }
        p[open] = (struct pollfd){.fd = fd, .events = POLLIN};
        which[open++] = i;
    }
    /* Readable once the process has ended, also while its parent has not
     * reaped it (a launcher that polls its children now and then). */
    uint64_t deadline = fr_deadline_ms(wait_ms);
    size_t running = open;
    while (running > 0) {
        uint64_t now = fr_now_ns();
        int left = now >= deadline
                       ? 0
                       : (int)((deadline - now + 999999) / 1000000);
        int k = poll(p, (nfds_t)open, left);
        for (size_t j = 0; k > 0 && j < open; j++)
            if (p[j].revents && p[j].fd >= 0) {
                ended[which[j]] = 1;
                close(p[j].fd);
                p[j].fd = -1; /* poll skips it */
                running--;
            }
        if (k <= 0)
            break;
    }
    for (size_t j = 0; j < open; j++)
        if (p[j].fd >= 0)
            close(p[j].fd);
    free(p);
    free(which);
}

/* A try to open the second store connection (fr_liveness_connect). */
#define FR_WATCH_TRY_MS 500

int fr_liveness_connect(frpc_agent *a, const fr_peer_info *peers,
                        uint64_t deadline, char *err, size_t errlen)
{
    fr_liveness *l = a->live;
    uint64_t now = fr_now_ns();

    for (uint32_t r = 0; r < l->world; r++)
        if (r != (uint32_t)a->set.rank && peers[r].same_host &&
            peers[r].pid > 0)
            l->pidfd[r] = fr_pidfd_open(peers[r].pid); /* -1: store only */
    if (l->world == 1)
        return 0;
    fr_store_ident me = fr_agent_store_ident(a, FR_STORE_ROLE_WATCH);
    /* By frpc_init's deadline (at least 1 ms: a try), in tries of at most
     * FR_WATCH_TRY_MS: the main connection reached the store, so one that
     * cannot may mean that rank 0 died, which the main one tells. */
    for (;;) {
        now = fr_now_ns();
        int ms = deadline > now ? (int)((deadline - now) / 1000000) + 1 : 1;
        int last = ms <= FR_WATCH_TRY_MS;
        int rc = FRPC_EBOOTSTRAP;
        if (fr_fault_hit(FR_FAULT_WATCH_REFUSED))
            snprintf(err, errlen, "rank %d: the store refused its watch "
                     "connection (fault site)", a->set.rank);
        else
            rc = fr_store_connect(a->set.store_host, a->set.store_port,
                                  last ? ms : FR_WATCH_TRY_MS, &me,
                                  &l->watch, err, errlen);
        if (rc != FRPC_EBOOTSTRAP || last)
            return rc;
        int lost = fr_agent_job_whole(a);
        if (lost) {
            const char *why = fr_store_last_error(a->store);
            snprintf(err, errlen, "rank %d: the job broke while it opened "
                     "its watch connection%s%s", a->set.rank,
                     *why ? ": " : "", why);
            return lost;
        }
    }
}

int fr_liveness_start(frpc_agent *a)
{
    fr_liveness *l = a->live;
    if (fr_fault_hit(FR_FAULT_INIT_THREADS))
        return FRPC_ENOMEM;
    if (l->watch) {
        if (fr_thread_create(&l->watcher, watcher_main, a))
            return FRPC_ENOMEM;
        l->watcher_started = 1;
    }
    if (fr_thread_create(&l->thread, liveness_main, a))
        return FRPC_ENOMEM;
    l->thread_started = 1;
    return 0;
}

void fr_liveness_open(frpc_agent *a)
{
    fr_liveness *l = a->live;
    pthread_mutex_lock(&l->lock);
    l->open = 1;
    pthread_cond_broadcast(&l->gate);
    pthread_mutex_unlock(&l->lock);
}

fr_peer_info *fr_liveness_unlost_peers(const frpc_agent *a)
{
    fr_liveness *l = a->live;
    fr_peer_info *p = l ? calloc(l->world, sizeof(*p)) : NULL;
    for (uint32_t r = 0; p && r < l->world; r++) {
        fr_loss *x = atomic_load(&l->slot[r]);
        if (x && x->state == FRPC_PEER_DEAD)
            continue; /* cleaned after when it died */
        p[r].pid = l->pid[r];
        p[r].same_host = l->same_host[r];
    }
    return p;
}

void fr_liveness_stop(frpc_agent *a)
{
    fr_liveness *l = a->live;
    if (!l)
        return;
    atomic_store(&l->stop, 1);
    pthread_mutex_lock(&l->lock); /* threads still at the gate: go */
    pthread_cond_broadcast(&l->gate);
    pthread_mutex_unlock(&l->lock);
    wake(l);
    fr_store_interrupt(l->watch); /* the watcher may be blocked in it */
    if (l->thread_started)
        pthread_join(l->thread, NULL);
    if (l->watcher_started)
        pthread_join(l->watcher, NULL);
    review_suspects(a, 1); /* nobody waits with them any more */
    l->thread_started = l->watcher_started = 0;
    fr_store_close(l->watch);
    l->watch = NULL;
}

int fr_liveness_report_lost(frpc_agent *a, const char *what)
{
    fr_liveness *l = a->live;
    int n = 0;
    if (!l)
        return 0;
    int first = !atomic_exchange(&l->reported_shutdown, 1);
    for (uint32_t r = 0; r < l->world; r++) {
        fr_loss *x = atomic_load(&l->slot[r]);
        if (!x)
            continue;
        n++;
        if (first)
            fprintf(stderr, "fabrpc: rank %d: %s without rank %u: %s\n",
                    a->set.rank, what, r, x->why);
    }
    return n;
}

void fr_liveness_destroy(frpc_agent *a)
{
    fr_liveness *l = a->live;
    if (!l)
        return;
    fr_liveness_stop(a);
    for (uint32_t r = 0; l->slot && r < l->world; r++) {
        free(atomic_load(&l->slot[r]));
        if (l->pidfd && l->pidfd[r] >= 0)
            close(l->pidfd[r]);
    }
    if (l->efd >= 0)
        close(l->efd);
    free(l->slot);
    free(l->pidfd);
    free(l->exit_due);
    free(l->same_host);
    free(l->pid);
    free(l->said_bye);
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->idle);
    pthread_cond_destroy(&l->gate);
    free(l);
    a->live = NULL;
}
