/*
 * Pool handlers on the progress thread, and the thread that stands in for
 * it while one runs long.
 *
 * Why: a request for a handler on the pool (frpc_register's default) was
 * handed to a sleeping worker, and that worker's wake-up was most of the
 * call: 8 B round trip 12-14 us on shm against 2.4 us for an FRPC_INLINE
 * handler, 33-45 us against 23 us on tcp, and 71-96 k calls/s at 64 in
 * flight against 1.5-2.2 M (docs/PERFORMANCE.md). So while the pool is
 * idle (nothing queued) and has two threads or more, the progress thread
 * takes the requests of its poll and runs their handlers itself right
 * after it (holding no lock; answers may still share messages).
 *
 * What keeps the pool's promise (a handler may block, wait in calls,
 * take as long as it likes): the stand-in thread. While the progress
 * thread runs handlers it looks every FR_STANDIN_TICK_NS; a handler it
 * finds running on two looks in a row has run a tick or more: the
 * requests taken after it go to the pool, its function is marked slow
 * (its later requests go to the pool at once), and the stand-in polls in
 * the progress thread's place until that handler returns. So a handler
 * that blocks until another request arrives still sees that request
 * handled, a tick or two late the first time. Handlers that return
 * sooner but are not quick go to the pool too, so that they run in
 * parallel as before: a function whose runs here took 100 us or more
 * three times in a row (one run in 8 is timed, and each run after a long
 * one) is slow; and once one poll's handlers have run a tick in all, the rest
 * of them go to the pool. A slow function's runs on the pool are timed:
 * FR_STANDIN_QUICK_RUNS quick ones in a row bring it back.
 *
 * Shutdown: fr_progress_stop does not wait for a handler the progress
 * thread runs (it may wait for what the shutdown ends next: a call in
 * flight); the thread is joined by fr_progress_join, before the pool is
 * destroyed, as a pool handler would be waited for there.
 */
#ifndef FR_RPC_STANDIN_H
#define FR_RPC_STANDIN_H

#include <stdint.h>

typedef struct frpc_agent frpc_agent;
typedef struct frpc_request frpc_request;
typedef struct fr_standin fr_standin;

#define FR_STANDIN_TICK_NS 1000000ull    /* how often the stand-in looks */
/* A handler this long gains more from the pool's parallel threads than
 * the hand-off costs it (about 10 us): FR_STANDIN_HEAVY_RUNS timed runs
 * in a row this long make its function slow. */
#define FR_STANDIN_HEAVY_NS 100000ull
#define FR_STANDIN_HEAVY_RUNS 3
#define FR_STANDIN_IDLE_NS 100000000ull  /* no run this long: stop looking */
/* A slow function's runs on the pool in a row under FR_STANDIN_HEAVY_NS
 * that make it quick again: this many the first time, doubled each time
 * it goes slow again, up to FR_STANDIN_QUICK_RUNS << FR_STANDIN_QUICK_MAX
 * (a handler that blocks now and then costs a stand-in's millisecond or
 * two each time it comes back, less and less often). */
#define FR_STANDIN_QUICK_RUNS 64u
#define FR_STANDIN_QUICK_MAX 6u

/* Starts the stand-in thread (it sleeps until the first run). 0 or
 * FRPC_ENOMEM. Called by fr_progress_start before the progress thread. */
int fr_standin_start(frpc_agent *a);

/* Stops and joins the stand-in thread. a->stop must be set (a stand-in
 * polling in the progress thread's place then returns). The requests
 * still taken are run by the progress thread. NULL stand-in: a no-op. */
void fr_standin_stop(frpc_agent *a);

/* Frees the stand-in, once the progress thread has been joined. */
void fr_standin_free(frpc_agent *a);

/* Called by the progress thread around polls that fr_standin_run follows
 * at once (its loop's poll; its nap, whose last look is a poll): only
 * inside them may it take (a request taken by a poll elsewhere, then
 * left while that thread stood aside for a spinning caller, waited for
 * the caller to stop, and a call to one's own rank waited out its
 * timeout). */
void fr_standin_poll_begin(frpc_agent *a);
void fr_standin_poll_end(void);

/* From on_request, on the thread that polls: 1 if r was taken, to run on
 * the progress thread after this poll (fr_standin_run); 0 if it must go
 * to the pool as before (not the progress thread, or inside a handler
 * there, the pool busy or of one thread, the function slow, a shutdown
 * begun, the list full). Never blocks. */
int fr_standin_take(frpc_agent *a, frpc_request *r);

/* A pool thread ran a handler of fn, a slow function, in ns: a quick
 * run counts towards clearing fn's mark (FR_STANDIN_QUICK_RUNS), a long
 * one starts the count again. Never blocks. */
typedef struct fr_func fr_func;
void fr_standin_pool_ran(fr_func *fn, uint64_t ns);

/* The progress thread, about to wait inside a handler it runs during its
 * poll (an inline handler's nested call): the requests its poll took go
 * to the pool now, since they would run only after that poll, and the
 * wait may be for one of them (test_api: an inline handler waiting for a
 * pool handler's answer, all three requests read by one poll under load,
 * waited to its 5 s timeout). A no-op on any other thread, or inside a
 * taken handler (the stand-in drains those). */
void fr_standin_release(frpc_agent *a);

/* 1 if requests are taken and not yet run. The progress thread only. */
int fr_standin_has_taken(const frpc_agent *a);

/* The progress thread, after its poll: runs the taken handlers in order,
 * but those the stand-in has handed to the pool. */
void fr_standin_run(frpc_agent *a);

/* 1 if this thread is the progress thread running a handler of a's (it
 * counts as one of the agent's handler threads, like a pool worker). */
int fr_standin_here(const frpc_agent *a);

#endif /* FR_RPC_STANDIN_H */
