/*
 * fabrpc — remote procedure calls between the ranks of a distributed job,
 * over libfabric. This is the one public header.
 *
 * Objects and lifetimes
 *   frpc_agent    long-lived handle, one per rank (per process, usually):
 *                 made by frpc_init, ended by frpc_shutdown.
 *   frpc_request  one-shot: an incoming call, handed to a handler. It stays
 *                 valid until it is answered exactly once with frpc_respond
 *                 or frpc_respond_error, from any thread, now or later
 *                 (deferred response). Answering frees it.
 *   frpc_result   the outcome of a call, owned by the caller, emptied with
 *                 frpc_result_clear.
 *   frpc_future   one-shot: an asynchronous call, owned by the caller until
 *                 frpc_future_free. It completes exactly once, with a reply,
 *                 a remote error, a timeout, a cancellation, a lost peer or
 *                 shutdown.
 *
 * Errors: every fallible function returns 0 or a negative FRPC_E* code
 * (fabrpc_errors.h); frpc_strerror gives its text. When a function fails,
 * it has not taken ownership of anything passed to it, but for the
 * answering functions, which say so: frpc_respond and frpc_respond_error
 * free req whatever they return but FRPC_EINVAL, and frpc_respond_owned
 * takes its data the same way.
 *
 * Threads: every function may be called from any thread unless its comment
 * says otherwise. Handlers run on the agent's thread pool, or, when
 * registered FRPC_INLINE, on the thread that drives progress. Handlers may
 * make calls, sync or async, to any rank including their own (nested
 * calls); see frpc_call for the limit.
 *
 * Callbacks: when a function that takes a callback returns an error, the
 * callback will never be called.
 *
 * Timeouts: every int timeout_ms parameter means the same thing, in
 * every function that takes one (calls, waits, barriers, shutdown,
 * transfers, notifications, frpc_mem_deregister). > 0: that many
 * milliseconds. FRPC_TIMEOUT_DEFAULT (0): the agent's default timeout
 * (config.timeout_ms, FABRPC_TIMEOUT_MS, else 60 s), so that nothing waits
 * forever unless asked to, with one exception: a call that lent its args
 * (frpc_call's zero-copy, frpc_call_async_lent) over a provider other
 * than shm returns (its future is done) only once the callee can no
 * longer read them, which a callee stopped without being lost delays
 * past any timeout (over shm it ends at its timeout). A timeout does not
 * cut short a copy under way: over shm (libfabric 1.17) a transfer's
 * bytes are copied while it is posted (see frpc_get_async), in pieces of
 * up to 4 MiB, and posting stops at the deadline, so frpc_get and
 * frpc_put of many MiB return FRPC_ETIMEDOUT once the piece being copied
 * then is done (256 MiB, timeout_ms 10, 8 runs here: 11-18 ms, 8-32 MiB
 * of it moved; what a transfer that timed out moved is undefined).
 * Emulated (see "Native or emulated"), a put sends its bytes as
 * requests of up to 4 MiB, and one under way is not cut short either:
 * 256 MiB over shm, timeout_ms 10, sets of 15 runs one after another
 * (docs/bench/2026-12-07-emu-timeout; 1.5.0): idle machine, 3 sets, gets
 * 10.0-10.5 ms, puts 14.8-30.6 ms; beside a test suite, 3 sets, gets
 * 10.0-17.9 ms, puts 12.5-108 ms. A
 * batch's posting stops at its deadline too, but its ops are all checked
 * first and those posted end as they can: 20,000 ops of 4 KiB with a 5
 * ms timeout, 20 runs each, quiet machine, returned FRPC_ETIMEDOUT after
 * 5.3-16 ms over shm, 5.3-66 ms over tcp (medians 6-10), emulated over
 * tcp 14.0-15.1 ms; on a loaded machine later (20.2-20.6 ms beside a
 * test suite).
 * FRPC_TIMEOUT_NONE (-1, or any negative value): no limit; a call with
 * no limit still ends when its peer is lost or the agent shuts down
 * (immediate: at once; graceful: only at the shutdown's own timeout,
 * since a graceful shutdown waits for the calls in flight, so one whose
 * answer never comes holds a graceful frpc_shutdown(FRPC_TIMEOUT_NONE)
 * forever, and its callee's with it).
 *
 * Codes that mean one thing everywhere:
 *   FRPC_ETIMEDOUT   a wait ran out of time: a call's own timeout, or a
 *                    wait's (frpc_future_wait, frpc_wait_all/_any,
 *                    frpc_barrier, frpc_shutdown). For a future, a wait
 *                    that ran out leaves it in flight (frpc_future_test
 *                    is 0); a call that timed out has completed.
 *   FRPC_EDEADLK     a wait refused because waiting here could deadlock
 *                    (the nesting limit: see frpc_call; frpc_barrier on
 *                    the polling thread; frpc_shutdown from the agent's
 *                    own threads; frpc_on_peer_lost from a handler while
 *                    the peer-lost report waits in a call). Nothing
 *                    waited.
 *   FRPC_EAGAIN      refused for want of a resource that frees itself
 *                    (max_inflight calls in flight): try again later.
 *   FRPC_EINPROGRESS asked for the outcome of a future still in flight.
 *   FRPC_EPEERLOST   the peer the operation needs is lost.
 * A function documents the codes it returns; a positive return is never
 * an error (frpc_future_cancel's 1: it had completed already).
 *
 * Lost peers: a rank whose process ends without frpc_shutdown (killed,
 * crashed, exited) is lost, and so is one that shut down while others
 * still call it. Every call to it, in flight or new, then ends with
 * FRPC_EPEERLOST, whatever its timeout (also a call, notification or
 * transfer that reaches it while it shuts down and takes no more
 * requests: its error says so, and frpc_peer_state may still say ALIVE
 * a moment; FRPC_ESHUTDOWN means this rank's own shutdown only); so do
 * barriers, which can no
 * longer complete (one entered once a loss is known fails at once with
 * FRPC_EPEERLOST, rank 0's death included; one under way when rank 0
 * dies, FRPC_EBOOTSTRAP: its process serves the bootstrap store that
 * barriers meet in). A process that dies is
 * noticed at once (its connection to the bootstrap store closes; on one
 * host its pid ends); a host that vanishes without closing connections,
 * within config.peer_timeout_ms (5 s; TCP keepalive). That verdict comes
 * from the store's connections, so it is rank 0's view: when the network
 * splits, the ranks that still reach rank 0's host find the others lost,
 * and a rank cut off from it finds rank 0 lost ("unreachable") but no
 * other rank: while the network is cut, its calls to them end only by
 * their own timeouts. Once it is back, a rank that marked it lost
 * answers its next request FRPC_EPEERLOST ("marked this rank lost"), and
 * it marks that rank lost in turn, ending its other calls there; a call
 * whose request that rank had taken before the cut, with nothing sent
 * since, still ends only by its timeout. Give calls between hosts a
 * timeout. A process that is
 * stopped (SIGSTOP, a debugger) or starved of CPU is not lost, however
 * long: calls to it end by their own timeouts, and it works on when it
 * resumes; it then finds lost the ranks that ended meanwhile, those that
 * shut down LEFT (rank 0 included, see frpc_shutdown). See
 * frpc_peer_state and frpc_on_peer_lost. One exception, over shm: a
 * process stopped in the middle of copying this rank's memory (reading
 * a large call's args or a put's bytes from it, or its own get or put on
 * this rank's region) holds a lock in this rank's shared memory that
 * libfabric 1.17's shm provider holds for the whole copy and takes on
 * every poll: this rank's polls, and so its waits and timeouts, stall
 * until that process resumes or dies (a death is repaired). A copy that
 * runs delays them the same way, on a loaded machine by up to the whole
 * transfer's copy (calls with a 500 ms timeout ended after about 1 s
 * while a peer's 256 MiB gets ran, load average near 10).
 *
 * Membership: only members of the job can make a rank run anything. With
 * a job key (FABRPC_JOB_KEY, made per job by fabrpc-run), a process must
 * prove it holds the key to use the bootstrap store, and the key never
 * crosses the network; a process that fails the proof is refused and
 * changes nothing for the job, even while it is still starting (it
 * cannot be told from a misconfigured member: see frpc_init). Without a
 * key, anyone who can reach the store's port can join the job: use a key
 * wherever others share the network. A flood of connections to that
 * port is another matter: it cannot join or change anything, and one
 * that sends nothing only slows a start (README, "Who may join a job");
 * one that sends well-formed first messages faster than a rank's round
 * trip could delay it past its init timeout. Frames
 * that carry another job's token are dropped and counted (frpc_stats), and
 * so are frames whose sender is not the member they claim to be, where
 * the provider reports senders (tcp, sockets; shm and udp do not, and
 * there the token is the check). Over shm a process outside the job
 * cannot even find a rank once frpc_init has returned: its region's name
 * in /dev/shm is gone by then (since 1.5).
 */
#ifndef FABRPC_H
#define FABRPC_H

#include <stddef.h>
#include <stdint.h>
#include <msgpack.h>

#include "fabrpc_errors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct frpc_agent frpc_agent;
typedef struct frpc_request frpc_request;

#define FRPC_TIMEOUT_DEFAULT 0 /* the agent's default timeout */
#define FRPC_TIMEOUT_NONE (-1) /* no limit */

/* ------------------------------------------------------------------ */
/* Version and ABI                                                     */
/* ------------------------------------------------------------------ */

/*
 * The version of this header. frpc_version() gives the library's, which
 * may be newer: a program runs with any library of the same major version
 * at least as new as the header it was built against.
 *
 * How the structs grow without breaking compiled programs: frpc_config
 * and frpc_stats are plain structs the caller allocates (on the stack,
 * filled field by field), and each carries its size as the program was
 * compiled, taken by a macro (frpc_config_init, frpc_get_stats). New
 * fields only ever go at the end; the library reads and writes no byte
 * past the size it was given, and treats a config field the program did
 * not know of as unset (the 1.2-1.3 and 1.4 structs have one size on
 * LP64, fn_stats taking what was padding: frpc_config_init of any
 * release sets it unset there, so a 1.2-1.3 program that fills its
 * config as said above runs unchanged; one that copies a config by
 * assignment or fills it without frpc_config_init may pass fn_stats
 * set, and later releases' fields make the struct larger). A size that
 * is not one a release's struct had
 * (frpc_config) or is over 1024 bytes (frpc_stats, frpc_fn_stats: none
 * will be that large) is refused with FRPC_EINVAL before any byte is
 * read or written. frpc_xfer (since 1.1) grows the same way: the
 * frpc_transfer macros pass its size (op_size), the ops are read
 * op_size bytes apart, no byte of an op past op_size is read, a field
 * the program did not know of counts as unset, and an op_size smaller
 * than the first frpc_xfer's, or over 1024 bytes (no frpc_xfer will be
 * that large), fails with FRPC_EINVAL. That keeps the cost
 * of a field nil (no setter call, no allocation), where opaque objects
 * would add both to every init. frpc_result is the exception: it never
 * grows (it is complete: status, data, length, remote code, message);
 * new details of a call's outcome come through new functions.
 * frpc_mp_view and frpc_mp_buf carry no size either: they are made of
 * msgpack-c's types and do not change within fabrpc 1.x (see "msgpack
 * helpers").
 */
#define FRPC_VERSION_MAJOR 1
#define FRPC_VERSION_MINOR 5
#define FRPC_VERSION_PATCH 0
#define FRPC_VERSION_NUMBER                                                   \
    (FRPC_VERSION_MAJOR * 10000 + FRPC_VERSION_MINOR * 100 + FRPC_VERSION_PATCH)

/* The library's version as FRPC_VERSION_NUMBER computes it (10000 for
 * 1.0.0); string, if not NULL, gets "1.0.0" (static). Never fails. */
int frpc_version(const char **string);

/* "Not set": every integer field of frpc_config holds it after
 * frpc_config_init, and then takes its value from the environment or the
 * default. Any other value is taken as given (and checked). */
#define FRPC_UNSET (-2147483647 - 1)

/* ------------------------------------------------------------------ */
/* Configuration                                                       */
/* ------------------------------------------------------------------ */

typedef enum frpc_progress_mode {
    FRPC_PROGRESS_ADAPTIVE = 0, /* spin for spin_us, then sleep (default) */
    FRPC_PROGRESS_BUSY = 1,     /* never sleep: lowest latency, burns a core */
    FRPC_PROGRESS_BLOCKING = 2  /* sleep at once when there is nothing to do */
} frpc_progress_mode;

/* How one-sided transfers move bytes (config.rma; see "Registered memory
 * and one-sided transfers"). The type and its values: since 1.2. */
typedef enum frpc_rma_mode {
    FRPC_RMA_AUTO = 0,    /* native when the provider can (not sockets
                             nor udp), else emulated */
    FRPC_RMA_NATIVE = 1,  /* the provider's RMA, or frpc_init fails */
    FRPC_RMA_EMULATE = 2  /* messages to the owner, whatever the provider */
} frpc_rma_mode;

/*
 * Settings for frpc_init. Fill with frpc_config_init, then change fields.
 * Every integer field starts FRPC_UNSET and every string NULL: then it is
 * taken from the environment, then from the default. A value that is set
 * wins over the environment, and is checked (FRPC_EINVAL from frpc_init,
 * with the field named in errbuf, when it is out of range). A string
 * field set to "" counts as unset (NULL), and so does any environment
 * variable set to "" (FABRPC_JOB_KEY too: no key, as fabrpc-run, which
 * then makes one, reads it), but for the field job_key: config.job_key
 * = "" fails frpc_init with FRPC_EINVAL (an empty secret in the program
 * is a mistake, never a choice to run without one).
 *
 *  rank, world_size  FABRPC_RANK/FABRPC_WORLD_SIZE, else RANK/WORLD_SIZE
 *                    (torchrun), OMPI_COMM_WORLD_RANK/_SIZE (mpirun),
 *                    PMI_RANK/PMI_SIZE, SLURM_PROCID/SLURM_NTASKS (srun);
 *                    with none set, a single rank (0 of 1), which
 *                    frpc_init says on stderr (a job started without its
 *                    launcher would otherwise run quietly alone). Set
 *                    both or neither (one alone: FRPC_EINVAL); in the
 *                    environment the first pair of which either is set
 *                    is used (half set: FRPC_EINVAL, not skipped), and
 *                    the pairs after it are not read, even when they
 *                    disagree (srun running torchrun sets SLURM_PROCID,
 *                    one per host, and RANK, the rank).
 *  store_addr        FABRPC_STORE_ADDR ("host:port", "[v6addr]:port"),
 *                    else MASTER_ADDR
 *                    with port MASTER_PORT + 1 (MASTER_PORT itself is left
 *                    to torch.distributed's own store), else
 *                    "127.0.0.1:29500"; found apart from the rank (rank
 *                    from FABRPC_RANK, store from MASTER_ADDR is fine).
 *                    A host that is neither a name (letters, digits,
 *                    '.', '-', '_') nor an IP address: FRPC_EINVAL at
 *                    once. A name that does not resolve is tried again
 *                    until init_timeout_ms; another program answering on
 *                    the port fails frpc_init at once (FRPC_EBOOTSTRAP,
 *                    "not a fabrpc bootstrap store", quoting its answer;
 *                    rank 0 says it too, after "cannot listen"); one
 *                    that accepts and says nothing, or closes, looks
 *                    like a stopped or ending rank 0: it is waited for
 *                    until init_timeout_ms (rank 0 itself, which cannot
 *                    listen there, fails within about a second:
 *                    FRPC_EBOOTSTRAP, "cannot listen").
 *                    Rank 0 serves the bootstrap store
 *                    there; the others connect. A world of one rank has
 *                    no store (nothing to meet): store_addr is unused,
 *                    and neither it nor the variables it comes from are
 *                    read, so a bad one does not fail frpc_init there.
 *  providers         FABRPC_PROVIDER, else FI_PROVIDER, else automatic
 *                    (shm when all ranks share a host, otherwise the first of
 *                    verbs, efa, psm3, tcp, sockets that every rank has).
 *                    A comma list such as "shm,tcp" is a preference order.
 *                    FI_PROVIDER's exclusion form ("^shm,udp") leaves the
 *                    automatic order among what libfabric still offers.
 *                    FI_PROVIDER, when set, is libfabric's filter too: a
 *                    provider it hides cannot come up, whatever
 *                    FABRPC_PROVIDER says (frpc_backend_report and
 *                    frpc_init's messages name FI_PROVIDER as the reason).
 *                    libfabric takes FI_PROVIDER's names as written,
 *                    spaces included ("tcp, shm" hides shm), in any case.
 *                    A name no libfabric provider has (a typo, or what is
 *                    no name: "^udp" inside a list, ";rxm", 32 characters
 *                    or more) fails frpc_init with FRPC_EINVAL, naming it
 *                    and the providers that came up; so does an empty
 *                    name in config.providers or FABRPC_PROVIDER
 *                    ("tcp,,shm", "shm,"), and a list of more than 16
 *                    different names. In fabrpc's own list spaces
 *                    around a name are ignored, and case ("TCP" is tcp).
 *  strict            0 or 1; FABRPC_STRICT, else 0. When on, every
 *                    provider in the list must come up, or frpc_init fails
 *                    with FRPC_ENOBACKEND naming each missing one and why;
 *                    with no list (none of config.providers,
 *                    FABRPC_PROVIDER or FI_PROVIDER set; FI_PROVIDER's
 *                    exclusion form lists none), frpc_init fails with
 *                    FRPC_EINVAL.
 *  max_msg_size      bytes, 1..2^40; FABRPC_MAX_MSG, else 64 MiB. Larger
 *                    args or replies are refused with FRPC_ETOOBIG, on both
 *                    sides. Error answers (frpc_respond_error's text, cut
 *                    at 1024 bytes) go whatever this is.
 *  init_timeout_ms   1..86400000; FABRPC_INIT_TIMEOUT_MS, else 60000.
 *                    Bound on the whole of frpc_init, counted from its
 *                    start: store connection, address exchange and the
 *                    barriers that end it share this one deadline.
 *  peer_timeout_ms   1..3600000; FABRPC_PEER_TIMEOUT_MS, else 5000; a
 *                    value under 4000 is taken as 4000. How soon a rank
 *                    whose host vanished without closing its connections
 *                    (power, network cut) is taken for lost; a process
 *                    that dies is noticed at once whatever this is (see
 *                    "Lost peers"). The verdict on any rank but 0 is rank
 *                    0's (its store watches every rank's connection with
 *                    rank 0's own value), so rank 0's value is the one
 *                    that counts for them; a rank's own value bounds how
 *                    soon it finds rank 0's host gone. Give every rank the
 *                    same. The time counts from the last packet that came
 *                    from the host (an idle connection is probed every
 *                    second): a network outage or a frozen host (not a
 *                    stopped process: see "Lost peers") shorter than
 *                    peer_timeout_ms - 3 s is ridden out, one of
 *                    peer_timeout_ms or more is not, and one in between
 *                    may be, depending on when it began. Set it above
 *                    the longest outage the job should survive, plus 3 s.
 *  timeout_ms        > 0, or negative (FRPC_TIMEOUT_NONE) for no limit,
 *                    but for INT_MIN, which is FRPC_UNSET;
 *                    FABRPC_TIMEOUT_MS (1..2^31-1, or "none" for no
 *                    limit: there 0 or a negative number fails frpc_init
 *                    with FRPC_EINVAL), else 60000. What
 *                    FRPC_TIMEOUT_DEFAULT means (see "Timeouts" above).
 *  job_key           FABRPC_JOB_KEY, else none. The job's secret
 *                    (any string of 1..255 bytes), the same on every rank:
 *                    see "Membership" above. A rank with another key, or
 *                    none when others have one, fails frpc_init at once
 *                    (FRPC_EACCES); the others wait for that rank until
 *                    their init timeout (see frpc_init).
 *  progress          a frpc_progress_mode; FABRPC_PROGRESS
 *                    (busy|adaptive|blocking), else adaptive.
 *  spin_us           0..10000000; FABRPC_SPIN_US, else 200. How long an
 *                    adaptive thread spins before it sleeps. Over shm a
 *                    spin also yields the CPU (sched_yield) after each
 *                    10 us without work, so that with more ranks than
 *                    cores the rank a message is for is not kept
 *                    waiting by it (busy mode never yields so).
 *  threads           1..256; FABRPC_THREADS, else 4. Size of the thread
 *                    pool that runs handlers (all but FRPC_INLINE ones;
 *                    with 2 or more, the progress thread runs them itself
 *                    while the pool is idle: see FRPC_INLINE) and future
 *                    callbacks. With 2 or more (since 1.5), a pool thread
 *                    that waits (a nested call, a future, a barrier) when
 *                    no other pool thread would be left free starts one
 *                    more, so that requests are still served: the pool
 *                    grows while its handlers wait, up to 256 threads,
 *                    and keeps them until frpc_shutdown. With 1 it never
 *                    grows: handlers run one at a time, and a pool
 *                    handler's wait fails FRPC_EDEADLK (see frpc_call).
 *  queue_len         1..2^20, else 1024. Tasks the pool queues before
 *                    back-pressure: when the queue is full, the thread that
 *                    submits runs the task itself (and so stops polling
 *                    meanwhile).
 *  max_inflight      1..2^30; FABRPC_MAX_INFLIGHT, else 65536. Calls this
 *                    rank may have in flight at once (sync and async, to
 *                    all ranks): one more fails at once with FRPC_EAGAIN,
 *                    so memory stays bounded however fast calls are made,
 *                    but for calls that ended while their request still
 *                    waited to be sent: a call to a stopped rank that
 *                    times out stops counting, while its args' copy may
 *                    stay queued toward that rank (in fabrpc's rendezvous
 *                    block, or over tcp in the provider) until the rank
 *                    resumes or is lost, so a caller that keeps calling a
 *                    stopped rank grows by its args meanwhile (about 20
 *                    MB/s with 200 KB args and 500 ms timeouts; then, over
 *                    tcp, the resumed rank works through every expired
 *                    request first: tens of seconds). Give up on a rank
 *                    whose calls keep timing out. fabrpc's own calls
 *                    that tell a rank something it must hear (a
 *                    shutdown's goodbye to each rank, the word that a tcp
 *                    connection dropped) pass the limit, never refused
 *                    by it (since 1.5), and count while in flight.
 *  coalesce          0 or 1; FABRPC_COALESCE, else 1. On: small frames
 *                    to one rank that pile up while a thread is polling
 *                    (answers found in one poll, calls issued back to
 *                    back) are joined into one transport message, and
 *                    calls a thread starts right after one of its waits
 *                    returned may be held for its next wait to join them
 *                    (see frpc_call_async). How many are joined depends
 *                    on timing (which thread polls, and when: a burst
 *                    may also go frame by frame; frpc_stats counts
 *                    frames_coalesced); a lone frame is never held back.
 *                    0 sends every frame alone.
 *  errbuf, errbuf_len optional: where frpc_init writes a one-paragraph
 *                    explanation when it fails (owned by the caller).
 *  notify_queue      1..2^24; FABRPC_NOTIFY_QUEUE, else 65536.
 *                    Notifications this rank holds untaken (see
 *                    frpc_notify_wait); past that a sender gets FRPC_EAGAIN.
 *  zerocopy_min      bytes, 0..2^40; FABRPC_ZEROCOPY_MIN, else 65536
 *                    (measured: docs/PERFORMANCE.md). A frpc_call whose
 *                    args are at least this long lends them to the callee
 *                    instead of copying them (see frpc_call), and so does
 *                    frpc_respond_owned with its reply. 0: never.
 *  rma               a frpc_rma_mode; FABRPC_RMA (auto|native|emulate),
 *                    else auto. How frpc_get/frpc_put and batches move
 *                    bytes: auto uses the provider's RMA when its endpoint
 *                    has it and a test registration works, but for
 *                    sockets (whose RMA can stall for minutes under load)
 *                    and udp (see "Native or emulated"), else the
 *                    emulation by messages (and says so on
 *                    stderr);
 *                    native fails frpc_init with FRPC_ENOBACKEND (saying
 *                    why) when the provider cannot;
 *                    emulate always emulates. frpc_backend_report says
 *                    which is in use and why (see "Registered memory and
 *                    one-sided transfers").
 *  fn_stats          0 or 1; FABRPC_FN_STATS, else 1. Keep per-function
 *                    figures (frpc_get_fn_stats). They cost a clock read
 *                    and a few adds per call and per request: about 6% of
 *                    an 8-byte round trip on shm (docs/PERFORMANCE.md). 0
 *                    keeps none (frpc_get_fn_stats gives zeros,
 *                    frpc_fn_stats_names 0). Since 1.4.
 *
 * size is set by frpc_config_init (see "Version and ABI"); do not change
 * it. Strings are borrowed: frpc_init copies what it keeps.
 */
typedef struct frpc_config {
    size_t size;
    int rank;
    int world_size;
    const char *store_addr;
    const char *providers;
    int strict;
    long long max_msg_size;
    int init_timeout_ms;
    int peer_timeout_ms;
    int timeout_ms;
    const char *job_key;
    int progress;
    int spin_us;
    int threads;
    int queue_len;
    int max_inflight;
    int coalesce;
    char *errbuf;
    size_t errbuf_len;
    int notify_queue;  /* since 1.1 */
    long long zerocopy_min; /* since 1.2 */
    int rma;           /* since 1.2 */
    int fn_stats;      /* since 1.4 */
    /* new fields go here, and only here, making the struct larger (see
     * "How the structs grow") */
} frpc_config;

/* Fills *cfg with the unset values above and its size. A macro, so that
 * the size is the program's: call it as a function. NULL, or a size no
 * frpc_config will have (under sizeof(size_t), over 1024 bytes), is a
 * no-op. */
#define frpc_config_init(cfg) frpc_config_init_sized((cfg), sizeof(*(cfg)))
void frpc_config_init_sized(frpc_config *cfg, size_t size);

/* ------------------------------------------------------------------ */
/* Lifecycle                                                           */
/* ------------------------------------------------------------------ */

/*
 * Creates this rank's agent: resolves rank and world size, brings up the
 * transport, meets the other ranks through the bootstrap store, and starts
 * the progress thread. Blocks until every rank has joined or the init
 * timeout passes (config.init_timeout_ms, counted from the call; a failed
 * init may take up to a second more to release what it set up; the
 * timeout cannot cut short libfabric's first look at its providers in a
 * process, fi_getinfo, which takes well under a second here but was once
 * seen take over 30 s on a loaded machine). A rank that never joins
 * keeps the others here until that timeout, unless its launcher tells
 * the store: under fabrpc-run a rank that ends before it joined makes
 * every other rank's frpc_init fail at once with FRPC_EBOOTSTRAP, "rank
 * 2 ended before it joined the job: exited with status 3 (fabrpc-run)".
 * On success *out owns the agent until frpc_shutdown.
 *
 * Signals: fabrpc installs no signal handler, and a rank that aborts,
 * crashes or is sent SIGTERM or SIGINT dies by that signal. The threads
 * fabrpc starts (progress, pool, liveness, bootstrap store) block the
 * asynchronous signals (all but SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP,
 * SIGSYS, SIGABRT and SIGPIPE), so a signal sent to the process is taken
 * by one of the program's own threads, never by one of fabrpc's in the
 * middle of libfabric (a handler that called exit() there could hang the
 * process); a request handler that runs on one of them runs with those
 * signals blocked. Some
 * libfabric builds (Debian's among them) load libinfinipath, which takes
 * SIGINT, SIGTERM, SIGABRT, SIGSEGV, SIGILL and SIGBUS when it loads
 * (exit(1), a .btr file in the working directory, and a SIGTERM during
 * frpc_init could hang the process). libfabrpc does not link libfabric:
 * it loads it when libfabrpc itself is loaded (dlopen of libfabric.so.1,
 * found as the dynamic loader finds libraries; if that fails, frpc_init
 * says why), and puts back every handler that load replaced, so a program
 * keeps its own also when it loads libfabrpc with dlopen after setting
 * them (an interpreter's extension module, Python's ctypes); a signal
 * sent to another of its threads during that load still meets
 * libinfinipath's. A program that links libfabric itself loads
 * libinfinipath before main: libfabrpc puts those handlers back to their
 * defaults when it loads and again in frpc_init, and leaves alone any the
 * program sets itself. libfabric's shm provider puts a handler of its own
 * in front of the program's for SIGINT, SIGTERM, SIGSEGV and SIGBUS when
 * an shm endpoint opens: it removes the endpoint's shared-memory files,
 * then passes the signal on to the handler it found. frpc_init sets up
 * libfabric (providers, endpoints, shared-memory regions) on the calling
 * thread, and that thread holds off the signals others send it (not those
 * its own actions raise: SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS,
 * SIGABRT, SIGPIPE) for the whole of frpc_init except while it waits for
 * the other ranks or the bootstrap store: there a signal is delivered at
 * once (a SIGTERM without a handler ends a rank that waits for one that
 * never comes then, not at its init timeout), and one that came
 * meanwhile is delivered at the next such wait or when frpc_init returns
 * (the longest step without a wait is the first fi_getinfo, a few hundred
 * ms). frpc_shutdown, which closes them, does the same (it lets signals
 * in while it waits for its calls, the others or the store; sending what
 * it answered before it leaves, up to a second, is a step without one).
 * So a handler that calls exit() never runs inside
 * libfabric, malloc or one of fabrpc's locks, and ends the process
 * instead of hanging it. If the program exits from another thread
 * meanwhile, exit waits (at most 10 s) until the thread in frpc_init or
 * frpc_shutdown reaches such a wait, where it stops for good, and the
 * process ends; the exiting thread itself goes on (an exit handler of the
 * program's may shut an agent down). A child of fork() does not wait for
 * the parent's other threads (since 1.5); but as POSIX has it for any
 * multithreaded parent, such a child should end with _exit or exec, not
 * exit: exit runs libfabric's destructor, which waits for good on a lock
 * that another thread of the parent held at the fork (inside frpc_init,
 * say).
 *
 * Open files: rank 0 serves two store connections per rank, and every
 * rank holds a handle on each same-host peer's process and, over tcp, a
 * socket per peer. Where the world needs more than the process's soft
 * limit (RLIMIT_NOFILE) allows, frpc_init raises it, up to the hard
 * limit; where the hard limit is short too, it says so on stderr. Every
 * step a rank may fail at comes before the ranks' last meeting in
 * frpc_init, so that one rank's frpc_init does not return 0 while
 * another's fails.
 *
 * Every rank must have been started with the same world size, job key
 * and fabrpc protocol version. A rank whose world size or version
 * differs makes frpc_init fail at once (not at the init timeout), with a
 * message that names the rank and both values, on every rank that has
 * connected to the bootstrap store by then (once every rank has joined,
 * the job runs on, and such a process only fails its own frpc_init). A
 * rank whose job key is not the job's fails its own frpc_init at once
 * (FRPC_EACCES) and changes nothing else: a process without the key
 * cannot be told from a stranger, who must not be able to stop a job
 * from starting. The other ranks wait for the rank it should have been
 * until their init timeout (under fabrpc-run, mpirun or srun the failed
 * rank's exit ends the job first); rank 0's message then names the
 * refusal ("the store refused 1 connection(s) without the job key, the
 * last: a process claiming rank 1 failed the job key proof: ..."), when
 * its own init timeout is the first to run out (another rank's giving
 * up ends rank 0's frpc_init first, with that rank's news).
 * Rank 0's failure closes the store once the ranks connected to it have
 * left, so that they fail with their own message (e.g. no common provider),
 * and, when the job cannot start (a rank claimed twice or out of range, a
 * world size or version mismatch), once every rank has joined and so been
 * told (a process refused for its world size or version was told, and
 * counts for the rank it claimed): it waits up to 3 s in all, within its
 * init timeout (all 3 s when a rank never comes). A rank that comes later than that finds nothing at the
 * store's address and fails with FRPC_EBOOTSTRAP ("cannot reach bootstrap
 * store") only at its own init timeout. A rank started with a rank not below
 * its world size (RANK=2 WORLD_SIZE=2) fails with FRPC_EINVAL, and, in a
 * world of more than one rank (RANK=1 WORLD_SIZE=1 fails at once), first
 * tells the store, looking for it up to 5 s (or init_timeout_ms if less):
 * the others, which would wait for the rank it should have been, then fail
 * at once too (FRPC_EBOOTSTRAP, naming it). Two processes started with one
 * rank (RANK=1 twice): the one that reaches the store second fails at once
 * with FRPC_EINVAL ("rank 1 is already held by a live member of this job",
 * naming the variable its rank came from); if that was while the job was
 * still joining, the rank it was meant to be will never come, so every other
 * rank's frpc_init fails at once too (FRPC_EBOOTSTRAP, "rank 1 was claimed
 * twice"; rank 0's after the wait for late ranks above, and a rank started
 * within it is told too); once every rank has joined, it is only refused.
 * Rank 0 alike: the second one, which cannot listen at the store's address,
 * asks the store there (within a second) and is refused by it, with the
 * code a second rank 1 would get: FRPC_EINVAL as above, FRPC_EACCES if its
 * job key is not the job's, FRPC_EBOOTSTRAP if its world size or version
 * differs (since 1.5; before, FRPC_EBOOTSTRAP "cannot listen" for the
 * last two). A world of
 * one rank has no store, so nothing tells two such processes (or two
 * agents in one process) apart: each is a job of its own. cfg may be
 * NULL (every field unset); one not filled by frpc_config_init (its size
 * field not a size frpc_config has had in a release up to this library's)
 * fails with FRPC_EINVAL before anything else, errbuf untouched.
 *
 * Errors: FRPC_EINVAL (out NULL, bad config or environment value, a
 * rank another live process of the job holds),
 * FRPC_ENOBACKEND (strict mode, or no provider common to all ranks, or
 * config.rma native where the provider cannot do RMA, or libfabric
 * (libfabric.so.1) could not be loaded), FRPC_EBOOTSTRAP
 * (store unreachable; a rank did not join in time (for instance because
 * its job key was not the job's: that rank gets FRPC_EACCES), or joined
 * and went no further (the message names it and the step it never came
 * to), or gave its own frpc_init up (its timeout ran out first), or was
 * claimed twice; the ranks disagree on world size or version; or a value
 * in the store is garbled; the message says which), FRPC_EACCES (this rank's job
 * key is not the job's: another key, or none where the job has one, or
 * one where it has none), FRPC_EPEERLOST (a
 * rank other than 0 died during init; rank 0's death takes the store with
 * it: FRPC_EBOOTSTRAP), FRPC_ETRANSPORT (libfabric failed; the message
 * has its text), FRPC_ENOMEM. The details go to cfg->errbuf when given.
 * frpc_init may be called again in the same process once frpc_shutdown
 * has returned.
 */
int frpc_init(const frpc_config *cfg, frpc_agent **out);

enum {
    FRPC_SHUTDOWN_GRACEFUL = 0,  /* drain, then meet every rank at a barrier */
    FRPC_SHUTDOWN_IMMEDIATE = 1  /* fail what is in flight, leave at once */
};

/*
 * Ends the agent. Graceful: new calls from this rank's threads fail with
 * FRPC_ESHUTDOWN, calls already in flight finish (or, still in flight
 * when timeout_ms runs out, end with FRPC_ESHUTDOWN: a call without limit
 * whose handler never answers holds the shutdown that long, forever with
 * FRPC_TIMEOUT_NONE, and the callee's shutdown, which waits for this rank
 * at the barrier, with it), and this rank keeps
 * serving the others' requests until every rank has reached shutdown (a
 * barrier; their notifications it refuses, see frpc_notify); handlers
 * serving them may still make nested calls until then. A rank known lost is not waited for: the barrier fails at once
 * and shutdown goes on without it. A rank whose graceful shutdown timed
 * out (FRPC_ETIMEDOUT) reached shutdown all the same: its entry in the
 * barrier stays (unlike a timed-out frpc_barrier's), so a rank whose
 * shutdown arrives later, before it has learnt that that rank left (rank
 * 0 resumed from a stop, say), meets it and returns 0; one that has
 * learnt it first returns FRPC_EPEERLOST. Before the others learn that it left,
 * it polls until its sends to live ranks have completed (at most a
 * second; when its barrier failed or rank 0 was lost, also until the
 * handlers running have returned and their callers have read large
 * answers from this rank, at most half a second whatever timeout_ms), so
 * that an answer it sent is not overtaken by the news and the call ended
 * FRPC_EPEERLOST on the caller's side. Immediate:
 * in-flight calls end with FRPC_ESHUTDOWN and no barrier is held. Either
 * way, requests that were never answered are released, all threads are
 * joined and the agent is freed: it must not be used again.
 *
 * Other threads: a thread waiting in a call on the agent when shutdown
 * begins (frpc_call, a future's or notification's wait, a barrier, a
 * transfer) gets its outcome (FRPC_ESHUTDOWN for waits that cannot be
 * met any more), and frpc_shutdown frees the agent only after every such
 * thread has left the library; so too a thread in frpc_respond (or
 * _owned, _error), whose wait for room to send (a stopped caller) then
 * ends with FRPC_ESHUTDOWN, as does any send's. A thread may start a call
 * while shutdown runs (it fails with FRPC_ESHUTDOWN, or, graceful, runs
 * as the rules above say), but none may once it has returned, nor race
 * with its return. frpc_shutdown
 * itself may not be called from the agent's own threads (a handler, a
 * future's or notification's callback, the peer-lost function) nor from
 * a thread inside another call on the agent: it returns FRPC_EDEADLK
 * there, and nothing is freed. From inside a call on another agent of
 * the process (its callback, its handler) it may, and waits as any
 * thread would: the agent being shut down must not be waiting on the
 * calling one then (its peer-lost function setting the caller's, say).
 *
 * timeout_ms (see "Timeouts") bounds the whole of it: draining, the
 * barrier, and rank 0's wait for the others to leave the store it serves
 * (rank 0 leaves last, so that nobody loses the store in its last
 * barrier), but for rank 0's word to that store that it leaves, which its
 * own thread answers at once and which is waited for up to half a second
 * past timeout_ms (the store closes right after, and a rank stopped
 * meanwhile learns from it, when it resumes, that rank 0 left, and that
 * the ranks that left before rank 0 did). An immediate shutdown waits
 * for the store's answer to that word at most half a second, whatever
 * timeout_ms (a stopped rank 0 reads it when it resumes, before the
 * connection's end, and takes this rank for LEFT all the same); so with
 * rank 0 stopped it returns within about a second (its goodbye's half
 * second, below, and this one). A rank that shuts down after
 * rank 0 was lost, or finds it
 * lost during a graceful shutdown, or whose graceful shutdown's barrier
 * fails, or that shuts down immediately (rank 0 too: a rank that missed
 * the barrier, or found none, may be stopped, and resume only once the
 * store that would have told it is gone), tells the others itself (a
 * call to each, waited for at most half a second and never past
 * timeout_ms, but sent even once that has passed; immediate: after its
 * calls in flight have ended; graceful: once it has stopped
 * taking requests, whose calls then end FRPC_EPEERLOST, and the handlers
 * running have returned and their callers have read the answers (a large
 * one is read from this rank), waited for at most another half second
 * whatever timeout_ms (since 1.5; before, only with rank 0 lost, and
 * never past timeout_ms), so that their answers arrive before the goodbye ends the calls; an answer
 * deferred past that may find its call ended FRPC_EPEERLOST), so that
 * they see it LEFT rather than
 * DEAD: a rank stopped meanwhile reads these goodbyes when it resumes,
 * before it takes the store's end or a process's end for a death. A
 * rank that ends without a shutdown says none, and leaves nothing in
 * /dev/shm: what its agent made there (over shm, a 16 MiB region) has
 * no name once frpc_init has returned (since 1.5; the mappings stay), so
 * neither a kill nor an exit, of one rank or of every rank at once,
 * leaves it; a rank that ends during frpc_init has its name removed at
 * exit (exit, or a return from main; not a fork child's exit) or, when
 * it was killed, by the rank on its host that finds it dead (by
 * fabrpc-run, if none is left). It cannot bound a
 * provider call that does not return: over udp, libfabric 1.17's ofi_rxd
 * was seen looping inside fi_recv for good after bursts from several
 * ranks, and the shutdown then waits for the polling thread for ever
 * (README, "udp"); nor what an
 * application's handler does: handlers already running, and those queued
 * to the thread pool, run to their end before shutdown returns, whatever
 * timeout_ms and how (immediate fails this rank's calls in flight at once,
 * but still waits for them). Returns 0; FRPC_ETIMEDOUT (graceful only)
 * if the time ran out; FRPC_EPEERLOST (graceful only) if a rank was lost
 * before or during it, rank 0 included (stderr names it, once; the
 * ranks that leave after the same last barrier are not: 0, though an
 * frpc_on_peer_lost fn still set may report them LEFT meanwhile);
 * immediate returns 0 whatever ranks were lost and however long it
 * waited (past timeout_ms it takes lent args back, see frpc_call, and
 * stops waiting for the provider); FRPC_EBOOTSTRAP (graceful only) if the
 * store failed the last barrier other than by time (on rank 0: its own
 * connection to the store it serves failed); FRPC_EINVAL for a NULL agent
 * or a bad how, FRPC_EDEADLK (above), and FRPC_ESHUTDOWN at once when
 * another thread's frpc_shutdown of the agent is under way (that one
 * frees it; as for any call, this one may not race with its return), in
 * which cases nothing is freed. The agent is freed in every other case.
 * Blocks.
 */
int frpc_shutdown(frpc_agent *agent, int how, int timeout_ms);

/* This rank (0..world size - 1) and the job's number of ranks, fixed for
 * the agent's life; FRPC_EINVAL (negative: never a rank) for a NULL
 * agent. Never block. */
int frpc_rank(const frpc_agent *agent);
int frpc_world_size(const frpc_agent *agent);

/* ------------------------------------------------------------------ */
/* Lost peers                                                          */
/* ------------------------------------------------------------------ */

/* A rank's state (frpc_peer_state). */
enum {
    FRPC_PEER_ALIVE = 0, /* a member, not known to be gone */
    FRPC_PEER_DEAD = 1,  /* its process ended without frpc_shutdown, or
                            the provider cannot reach it any more */
    FRPC_PEER_LEFT = 2   /* it called frpc_shutdown */
};

/* rank's state as this agent knows it (its own rank: FRPC_PEER_ALIVE), or
 * FRPC_EINVAL (NULL agent), FRPC_ENORANK. A rank's state changes at most
 * once, from ALIVE. Never blocks. */
int frpc_peer_state(const frpc_agent *agent, int rank);

/* What an application may do when a rank is lost: log, stop its own
 * work, shut down. why: a short explanation, valid during the call. */
typedef void (*frpc_peer_fn)(frpc_agent *agent, int rank, int state,
                             const char *why, void *user);

/*
 * Sets the function called once for each rank that is lost (state DEAD or
 * LEFT), after every call to it has ended with FRPC_EPEERLOST. It runs on
 * the agent's liveness thread, one loss at a time, in the order they were
 * found; ranks lost before it was set are reported right after, in the
 * order they were found. It may run a while after frpc_peer_state says
 * the rank is lost (on shm, up to about 300 ms: locks the dead process
 * held in shared memory are repaired first). It may make calls to the
 * survivors and read state (a call still in flight when frpc_shutdown, on
 * another thread, stops the reports ends FRPC_ESHUTDOWN), but not call
 * frpc_shutdown (FRPC_EDEADLK: do that from another thread).
 * A report that takes long delays the next one.
 * NULL fn stops the reports; a second call replaces the first, and
 * reports every loss so far again to the new fn and user (even when they
 * are the same as before). user is passed as is. Once it returns, the
 * previous fn is not running and is not called again (but for a call
 * from inside fn itself, whose own run goes on), so what its user points
 * to may be freed: it waits for a report running on the liveness thread
 * to return, so the caller must not hold what that fn waits for (a lock
 * it takes, a request its call needs answered). Called from a thread
 * that runs this agent's handlers (a pool handler or callback, an
 * FRPC_INLINE handler on the polling thread) while that report waits in
 * a call (frpc_call, a future's wait, a transfer), it does not wait: the
 * call may need this very handler's answer (the report called this
 * rank); it returns FRPC_EDEADLK, says so on stderr, and the previous fn
 * stays set. Errors: FRPC_EINVAL (NULL agent), FRPC_EDEADLK (above).
 * Blocks only for such a report (since 1.4; before, it returned at once,
 * while the old fn might still run).
 */
int frpc_on_peer_lost(frpc_agent *agent, frpc_peer_fn fn, void *user);

/*
 * Waits until every rank has entered frpc_barrier (the same number of times)
 * or timeout_ms passes (see "Timeouts"). Requests keep being served while
 * waiting. A barrier that runs out did not happen for this rank: its
 * entry is taken back (a round trip to the store, which may add up to
 * half a second past timeout_ms when rank 0 is stopped), so the next
 * frpc_barrier of this rank is the same barrier again, and a loop that
 * retries on FRPC_ETIMEDOUT meets the others' first; if the others all
 * arrived while it was taken back, the barrier completed and returns 0
 * (and if the store could not be told in that half second, rank 0
 * stopped, the entry stays and may complete the others' barrier once
 * the store resumes: this rank's next one, the same barrier, then
 * returns at once).
 * Errors: FRPC_ETIMEDOUT, FRPC_EPEERLOST (a rank is lost: the
 * barrier can never complete. The store, which holds the barrier, may
 * learn of the loss a moment, tens of milliseconds, before this agent
 * does: frpc_peer_state can still say ALIVE for the lost rank just after
 * the barrier returned), FRPC_EBOOTSTRAP (the store is lost: rank 0, whose
 * process serves it, died or is gone, as when it dies during the
 * barrier; a barrier entered once a loss is known, rank 0's included,
 * fails at once with FRPC_EPEERLOST), FRPC_ESHUTDOWN (also when
 * frpc_shutdown begins on another
 * thread while this one waits: it ends within 100 ms; its entry, once
 * it went to the store, still counts for the others' barrier; one still
 * waiting its turn behind another thread's barrier entered nothing), FRPC_EDEADLK (called on the polling
 * thread, from an FRPC_INLINE handler or a callback it runs: no request
 * would be served meanwhile; or on a pool thread when no other could be
 * left free, as for nested calls (see frpc_call): with config.threads 1,
 * from any pool handler or callback), FRPC_EINVAL (NULL agent). Two threads'
 * barriers take turns; the second waits for the first no longer than its
 * own timeout_ms (running out there, it entered nothing either). Blocks.
 */
int frpc_barrier(frpc_agent *agent, int timeout_ms);

/* The active provider's short name ("shm", "tcp", "verbs", ...), and its
 * libfabric name ("tcp;ofi_rxm"). Static for the agent's life; "" for a
 * NULL agent. Never block. */
const char *frpc_provider(const frpc_agent *agent);
const char *frpc_provider_full(const frpc_agent *agent);

/* 1 if the named provider was tried on this rank and came up (it is
 * usable here, active or not), else 0 (also for a NULL agent or name).
 * Tried: those of the provider list (config.providers, FABRPC_PROVIDER,
 * FI_PROVIDER), else those of the automatic order (see config.providers):
 * a provider outside it (udp) is 0 unless listed, however usable. name
 * is the short name, as frpc_provider gives it ("tcp", not
 * "tcp;ofi_rxm"). Never blocks. */
int frpc_has_backend(const frpc_agent *agent, const char *name);

/* 0 if the named provider (its short name) is the active one;
 * FRPC_ENOBACKEND otherwise; FRPC_EINVAL for a NULL agent or name. Never
 * blocks. */
int frpc_require_backend(const frpc_agent *agent, const char *name);

/* Writes a report of every provider tried ("shm: up (active)", "verbs: not
 * available: ...", one per line), then how one-sided transfers move bytes:
 * "rma: native", or "rma: emulated (<why>)" (forced by config.rma or
 * FABRPC_RMA=emulate, what the provider lacks, sockets' or udp's
 * stalls), to buf, NUL-terminated and truncated to len. Returns the
 * length the full report needs (like snprintf); 0 for a NULL agent (buf
 * untouched). buf may be NULL when len is 0. */
size_t frpc_backend_report(const frpc_agent *agent, char *buf, size_t len);

/* ------------------------------------------------------------------ */
/* Registry and handlers                                               */
/* ------------------------------------------------------------------ */

/*
 * A handler answers req exactly once with frpc_respond,
 * frpc_respond_owned or frpc_respond_error, before returning or later
 * from any thread (deferred response). The answer frees req (but for
 * their FRPC_EINVAL): neither req nor its args may be used after it, and
 * a second answer is a use after free that fabrpc cannot detect. A
 * request never answered ends as a timeout on the caller's side (a call
 * without limit: as "Timeouts" says) and is released by frpc_shutdown:
 * another thread may still answer it, and read it, while frpc_shutdown
 * runs (the answer is sent; in an immediate shutdown, and in a graceful
 * one from its last polls on, just before the transport closes, it
 * fails FRPC_ESHUTDOWN instead), but neither once frpc_shutdown has
 * returned nor racing with its return: req is then gone, and answering
 * or reading it is a use after free. A
 * thread cannot ask whether frpc_shutdown has returned, so a program
 * that answers from its own threads has them answer, or stop and be
 * joined, before it calls frpc_shutdown.
 */
typedef void (*frpc_handler_fn)(frpc_request *req, void *user);

/* Run the handler on the thread that polls, as soon as the request
 * arrives: for short handlers that never block (they may still make
 * calls). Without it handlers run on the thread pool, or, while its queue
 * is full (config.queue_len), on the thread that polls all the same: a
 * handler that blocks then stops that thread's polling meanwhile. With
 * coalescing on, an answer an inline handler gives may leave only when
 * the handler returns (it can share a message with the poll's other
 * frames to that rank), so work done after frpc_respond delays the
 * answer too. A wait inside an inline handler (a call it makes) polls on
 * that thread, and the requests those polls take run their inline
 * handlers on top of it: the wait returns only once they have returned,
 * so one inline handler's nested call can be held, past its own answer's
 * arrival, by another's nested call (each ends by its own timeout at
 * the latest). Handlers that call and wait are better on the pool.
 *
 * Since 1.5, while the pool is idle (nothing queued) and has two threads
 * or more (config.threads), the progress thread runs the pool handlers of
 * the requests its own polls find (a waiting caller's polls hand theirs
 * to the pool) itself, right after the poll and holding no lock: a
 * hand-off to a sleeping pool thread cost most of a call (8 B
 * round trip on shm 12-14 us against 2.4 us, README "Handlers"). Such a
 * handler may still block, wait in calls, or run long: once it has run
 * about a millisecond (a tick or two of a watching thread), another
 * thread polls in the progress thread's place until it returns, the
 * requests that poll took after it go to the pool, and its function's
 * requests go to the pool from then on (frpc_stats.handlers_on_progress,
 * .progress_stand_ins). So that handlers that return sooner but are not
 * quick still run in parallel on the pool: a function whose handler took
 * 100 us or more in three timed runs in a row there is treated the same
 * (one run in 8 of the progress thread's is timed, and every run after a
 * long one: a function whose runs are the only ones there leaves after 3
 * to 10 runs that each take 100 us or more; runs of other functions in
 * between can make it later, one preempted for a millisecond sooner),
 * and once the handlers of one poll have run a millisecond in all, the
 * rest of that poll's requests go to the pool.
 * Such a function comes back to the progress thread after 64 runs in a
 * row on the pool under 100 us each (a first run that only set things
 * up, say); 128 the next time it goes to the pool, and so on, doubling
 * up to 4096.
 * What a handler can tell: the thread it runs on may be the progress
 * thread rather than a pool thread; and a request that arrives while
 * such a handler blocks waits a millisecond or two, the first time and
 * the first time after each such return to the progress thread. With
 * config.threads 1 pool handlers stay on the pool (or, its queue full,
 * on the polling thread, as above), and its nesting guard holds:
 * frpc_barrier there fails FRPC_EDEADLK. */
#define FRPC_INLINE 0x1u

/*
 * Registers handler under name (1..255 bytes). Functions are found by a
 * 64-bit hash of the name (FNV-1a over its bytes, 0 taken as 1), so every
 * rank must register the same names; a call that arrives before
 * registration fails with FRPC_ENOFUNC. Two names of one program share a
 * hash with odds of about n^2 / 2^65 for n names: FRPC_EEXIST below, the
 * same on every rank, and renaming either one mends it. flags is
 * 0 or FRPC_INLINE. user is passed to the handler as is (not owned).
 * Names that begin with "frpc." are fabrpc's own (FRPC_EINVAL), and so
 * is "fabrpc.internal.bye" (FRPC_EEXIST: taken; its name is on the wire
 * since 1.0, so it stays); the application may not call them either:
 * frpc_call and frpc_call_async(_lent) refuse them with FRPC_EINVAL,
 * before anything is sent.
 * name is copied. Any thread, also while calls arrive. Never blocks.
 * Errors: FRPC_EINVAL, FRPC_EEXIST (the name, or another name with the same
 * hash, is taken), FRPC_ENOMEM, FRPC_ESHUTDOWN.
 */
int frpc_register(frpc_agent *agent, const char *name, frpc_handler_fn handler,
                  void *user, unsigned flags);

/* The call's argument bytes (owned by req, valid until it is answered) and
 * their length; len may be NULL. Returns NULL when there are none, or req
 * is NULL (*len then 0). */
const void *frpc_request_args(const frpc_request *req, size_t *len);

/*
 * Takes req's args out of it: *data (len bytes, from malloc) becomes the
 * caller's, to free() or to answer with frpc_respond_owned, and req keeps
 * none: frpc_request_args and frpc_request_unpack see no args from then
 * on (a second take gives NULL and 0). Args that arrived in a buffer of
 * their own (lent ones, and most others over about 4 KiB on shm, 15.5
 * KiB on tcp and verbs, 64 KiB on sockets and udp) are handed over as
 * they are, without a copy; such a buffer may be longer than len (up to
 * twice, or 64 KiB for shorter args: its size a power of two), the rest
 * given back by realloc(*data, *len) when it is kept long. The others are copied into a new buffer. So a
 * handler that changes its args in place and answers with them
 * (frpc_respond_owned(req, data, len)) copies no byte of a long one on
 * either rank. No args: *data NULL, *len 0, and 0 returned.
 * Errors: FRPC_EINVAL (req, data or len NULL: nothing taken), FRPC_ENOMEM
 * (no memory for the copy: req keeps its args, *data NULL, *len 0). Does
 * not block. The thread that holds req (its handler, or whoever has it
 * to answer). Since 1.5.
 */
int frpc_request_take_args(frpc_request *req, void **data, size_t *len);

/* The calling rank, or FRPC_EINVAL for a NULL req. */
int frpc_request_source(const frpc_request *req);

/* The registered name of the function called (owned by the agent), or
 * NULL for a NULL req. */
const char *frpc_request_function(const frpc_request *req);

/*
 * Answers req with len bytes of data (copied before return; NULL when len
 * is 0) and frees req. Errors: FRPC_EINVAL (req NULL, or data NULL with
 * len > 0: req is not freed), FRPC_ETOOBIG (len over this rank's
 * max_msg_size: req is answered with that error instead, and freed; a
 * reply within it but over the caller's limit is sent, and refused there:
 * this returns 0, the call ends FRPC_ETOOBIG), and, when the answer could
 * not be sent (req is freed all the same; the caller's call ends by its
 * own timeout or peer loss): FRPC_ETRANSPORT, FRPC_EPEERLOST,
 * FRPC_ESHUTDOWN, FRPC_ETIMEDOUT (the provider had no room for it until
 * the caller's time ran out: see below), FRPC_ENOMEM (no memory to stage
 * a reply over the eager size: about 64 KiB, 15.5 KiB over tcp and
 * verbs, whose ofi_rxm layer splits longer messages). Does not wait for the
 * caller to take the answer. It waits only while the provider has no
 * room to send it, which happens when the caller stops reading (a
 * stopped or starved process with many answers owed: back-pressure), and
 * then at most until the caller's call would end by its timeout (its time
 * left when it sent, counted from the request's arrival here; a call
 * without limit: until the caller reads again or is lost). Any thread.
 */
int frpc_respond(frpc_request *req, const void *data, size_t len);

/*
 * frpc_respond without the copy: data (len bytes from malloc, calloc or
 * realloc, such as a msgpack_sbuffer's) becomes fabrpc's, freed with
 * free() once the caller has it. A reply of at least config.zerocopy_min
 * bytes is read by the caller's rank straight from data; a shorter one is
 * copied and freed at once. Ownership, unlike elsewhere: data is taken
 * whatever this returns, but for FRPC_EINVAL (req NULL, or data NULL with
 * len > 0), which takes nothing and does not free req; the caller must
 * not touch data after any other return. Returns and errors as
 * frpc_respond. Does not wait for the caller. Any thread. Since 1.2.
 */
int frpc_respond_owned(frpc_request *req, void *data, size_t len);

/*
 * Answers req with an error: the caller's call ends with FRPC_EREMOTE,
 * result.remote_code = code (any int, the application's own: 0 and the
 * FRPC_E* values too arrive as FRPC_EREMOTE with that remote_code, never
 * as the call's status) and result.error = message (copied; NULL gives
 * an empty message; longer than 1024 bytes is cut). Frees req. Errors:
 * FRPC_EINVAL (req NULL), and, the answer not sent (req is freed all the
 * same; the caller's call ends by its own timeout or peer loss):
 * FRPC_ETRANSPORT, FRPC_EPEERLOST, FRPC_ESHUTDOWN, FRPC_ETIMEDOUT (as for
 * frpc_respond). Waits as
 * frpc_respond does, only while the provider has no room. Any thread.
 */
int frpc_respond_error(frpc_request *req, int code, const char *message);

/* ------------------------------------------------------------------ */
/* Calls                                                               */
/* ------------------------------------------------------------------ */

/* The outcome of a call. Owned by the caller; frpc_result_clear frees what
 * it holds and zeroes it. A zeroed struct is a valid empty result. It
 * never grows (see "Version and ABI"). */
typedef struct frpc_result {
    int status;       /* 0 or FRPC_E* (the same as the call's return) */
    void *data;       /* reply bytes when status is 0 (NULL when empty) */
    size_t len;
    int remote_code;  /* FRPC_EREMOTE: the code given to frpc_respond_error */
    char *error;      /* status != 0: NUL-terminated explanation (the remote
                         message, the unknown function's name, the
                         provider's text, ...) */
} frpc_result;

/* Frees what res holds and zeroes it; NULL is a no-op. */
void frpc_result_clear(frpc_result *res);

/*
 * Calls function name on rank dst (any rank, its own included) with len
 * bytes of args and waits for the answer, at most timeout_ms (see
 * "Timeouts"). name and args are only read, and only until the call
 * returns. The waiting thread drives progress itself (and so may run
 * handlers for other ranks' requests meanwhile).
 *
 * Zero-copy: args of at least config.zerocopy_min bytes (64 KiB unless
 * set) are not copied: the callee reads them straight from args into the
 * buffer its handler sees, so args must not change until the call
 * returns. Such a call returns only once the callee can no longer read
 * args: it has read them (always so when the answer came), refused them,
 * or is lost, or, over shm, once the call has ended (its timeout, or a
 * shutdown) and taken them back at once (the callee copies them from this
 * process itself, and throws away a copy it finishes after that: its
 * handler never sees them; over tcp the provider may be serving a read
 * of them). Over shm that holds for 1024 lent args out at once per rank
 * (sync and async together); args lent while 1024 are out wait as over
 * other providers. So over other providers, when it ends first by its timeout,
 * it may return after the timeout by as long as the callee takes to
 * notice (at its next poll) that the caller's time ran out; a callee that
 * stops polling altogether without being lost holds it until it polls
 * again or is lost. There an frpc_shutdown on another thread ends such a
 * call's wait once the callee reads or refuses args, its process ends
 * (noticed also while the shutdown runs), or the shutdown's timeout_ms
 * runs out: then the shutdown takes args back, and the callee's handler
 * never sees them (its later reads fail, or their copies are thrown
 * away). The call returns what ended it first: FRPC_ETIMEDOUT if its
 * timeout ran out before the shutdown began (as a lent async call's
 * status, below), else FRPC_ESHUTDOWN.
 * Shorter args, and frpc_call_async's, are copied.
 *
 * A large reply is read from the callee after it answered; a callee that
 * pauses meanwhile (stopped, starved of CPU) delays the call but does not
 * end it before timeout_ms.
 *
 * On return res (if not NULL) holds the outcome; clear it with
 * frpc_result_clear. Returns 0 or: FRPC_EINVAL (NULL agent, a name NULL,
 * empty, over 255 bytes or fabrpc's own, see frpc_register; NULL args
 * with len > 0), FRPC_ENORANK (dst outside
 * 0..world-1), FRPC_ETOOBIG (args over this rank's config.max_msg_size,
 * refused before sending; or over dst's, sent and refused there, the call
 * ending at once; or the reply was),
 * FRPC_ENOFUNC (res->error names the function and rank), FRPC_EREMOTE,
 * FRPC_ETIMEDOUT (a late answer is dropped, never given to another call;
 * an answer this rank takes only after the deadline, having been stopped
 * or starved meanwhile, is late too),
 * FRPC_EPEERLOST (dst is lost, before or during the call: see "Lost
 * peers"), FRPC_ETRANSPORT, FRPC_ESHUTDOWN, FRPC_ENOMEM, FRPC_EPROTO
 * (fabrpc on dst answered with a code this library does not know, as a
 * newer version may), FRPC_EAGAIN when max_inflight calls are in flight
 * already, FRPC_EDEADLK when waiting would exceed the nesting limit
 * (below); res->error says which.
 * Blocks; any thread, including handlers.
 *
 * Nesting limit: a pool thread may wait for a call (frpc_call,
 * frpc_future_wait, frpc_wait_all/_any) only while at least one other pool
 * thread is free to serve requests. With config.threads 2 or more the pool
 * starts a thread when none would be free, so a burst of
 * requests whose handlers each call another rank, or this one, is served
 * whole; only the 256th thread's wait fails (255 pool threads wait at
 * once at most). With config.threads 1 the one pool thread never waits.
 * (A pool handler the progress thread runs, see FRPC_INLINE, holds no
 * pool thread: its waits are not counted.) An inline handler may nest
 * calls FRPC_MAX_INLINE_DEPTH deep, and the depth is the polling thread's:
 * the inline handlers that a waiting inline handler's polls run on top of
 * it (any rank's requests) count, so a burst of more than
 * FRPC_MAX_INLINE_DEPTH requests to inline handlers that call can fail
 * FRPC_EDEADLK: handlers that call belong on the pool. A
 * wait past either limit fails at once with FRPC_EDEADLK instead of
 * deadlocking (frpc_call then sends nothing). A wait with nothing to wait
 * for is no wait: frpc_future_wait on a completed future, and
 * frpc_wait_all/_any whose futures are done already, return as usual
 * past the limits too.
 */
#define FRPC_MAX_INLINE_DEPTH 8
int frpc_call(frpc_agent *agent, int dst, const char *name, const void *args,
              size_t len, int timeout_ms, frpc_result *res);

/* ------------------------------------------------------------------ */
/* Asynchronous calls and futures                                      */
/* ------------------------------------------------------------------ */

typedef struct frpc_future frpc_future;

/*
 * Starts a call of name on rank dst and returns at once with *out, a
 * future owned by the caller (free it with frpc_future_free). It never
 * waits for the answer and never creates a thread; it waits only while
 * the provider has no room for the send (a callee that stops reading,
 * with many requests owed: back-pressure), at most timeout_ms (then
 * FRPC_ETIMEDOUT, below). name and args are copied before return, so the
 * caller may reuse them at once. timeout_ms (see "Timeouts") bounds the
 * whole call: past it the future completes with FRPC_ETIMEDOUT, whether
 * or not anyone waits. Errors (then *out is NULL and nothing was sent):
 * as frpc_call's checks before sending (FRPC_EINVAL, for a NULL out too;
 * FRPC_ENORANK; FRPC_ETOOBIG over this rank's limit; FRPC_ESHUTDOWN;
 * FRPC_EAGAIN at max_inflight; FRPC_EPEERLOST for a lost dst;
 * FRPC_ENOMEM; never FRPC_EDEADLK, as it does not wait), FRPC_ETIMEDOUT
 * if the provider has no room for the send until the timeout passes, and
 * FRPC_EPEERLOST if dst is lost meanwhile. A transport failure of the
 * send is not returned: the future starts and ends with it
 * (FRPC_ETRANSPORT, or FRPC_EPEERLOST if dst is found lost within about
 * a second); nor are args over dst's limit: the future starts and ends
 * FRPC_ETOOBIG at once.
 *
 * Refilling a window: after one of this thread's waits (frpc_future_wait,
 * frpc_wait_any/all, frpc_call) returns, the first call it starts to a
 * rank leaves at once; further calls to that rank may be held and leave
 * together in one message at this thread's next wait, or when the
 * agent's progress thread next looks (within about 2 ms) if it does not
 * wait again soon. Pool threads never hold calls this way; coalesce = 0
 * turns it off.
 */
int frpc_call_async(frpc_agent *agent, int dst, const char *name,
                    const void *args, size_t len, int timeout_ms,
                    frpc_future **out);

/*
 * frpc_call_async without the copy (since 1.3): args of at least
 * config.zerocopy_min bytes are lent, as frpc_call lends them (the callee
 * reads them straight from args); shorter args are copied before return,
 * as by frpc_call_async. Lent args stay the call's until the future is
 * done (frpc_future_test returns 1, a wait on it returns its status, or
 * its callback runs): until then they must stay valid and unchanged, and
 * the caller keeps owning them (fabrpc never frees them).
 *
 * The future is done only once the callee can no longer read args: it has
 * read them (always so when the answer came), refused them, or is lost,
 * or, over shm, the call ended without its answer (its timeout,
 * frpc_future_cancel, frpc_future_free, a shutdown) and took them back
 * at once, as frpc_call does (within its limit of 1024 loans out): then
 * the callee's handler never sees them (it throws away a copy it
 * finishes after that). Over other providers
 * a lent call that ends by its timeout or frpc_future_cancel (its status
 * is then FRPC_ETIMEDOUT or FRPC_ECANCELED) is done later than that, by
 * as long as the callee takes to notice at its next poll; a callee that
 * stops polling without being lost holds it done-less until it polls
 * again, is lost, or frpc_shutdown takes args back (at the latest as it
 * returns; the callee's handler never sees them then).
 * frpc_future_free of a lent future that is not done does not wait: args
 * then stay the call's until the future would have been done (over shm,
 * where the free's cancel takes them back, that is when the free
 * returns, unless the answer came first). Elsewhere nothing tells when
 * that is, short of frpc_shutdown's return: to reuse or free args
 * sooner, end the call with frpc_future_cancel, then frpc_future_wait
 * (done means args are the caller's again), then free the future.
 *
 * Everything else (errors, *out, timeouts, refilling, callbacks, waits)
 * is frpc_call_async's; frpc_stats.zerocopy_sent counts the lent args.
 * Like frpc_call_async, it waits for the network only while the provider
 * has no room for the send.
 */
int frpc_call_async_lent(frpc_agent *agent, int dst, const char *name,
                         const void *args, size_t len, int timeout_ms,
                         frpc_future **out);

/*
 * A batching hint, like send(2)'s MSG_MORE: the calls (and answers) sent
 * between frpc_batch_begin and frpc_batch_end to a rank that already had
 * one since the last poll may be held and go to it in one transport
 * message, at the next poll by any thread or at the last frpc_batch_end,
 * whichever comes first. The first frame to each rank is never held.
 * Without the hint, held frames are only those a polling thread sends
 * (answers found in one poll) and the refills of frpc_call_async's
 * "Refilling a window". Use it around a loop of frpc_call_async
 * when many small calls go out together. Pairs nest and may be used from
 * any threads; an unpaired begin holds frames only until the next poll.
 * Neither blocks: what is held goes out at once where the provider has
 * room; toward a rank that has stopped reading, it is kept and sent by
 * later polls (the progress thread's among them) as room comes, until
 * the held calls' timeouts (then those calls end as if their sends
 * failed). Held frames never make another wait outlast its own timeout
 * (before 1.5, a thread whose poll sent them waited for room until
 * their deadline). 0, or
 * FRPC_EINVAL for a NULL agent and for an
 * frpc_batch_end with no frpc_batch_begin left to end.
 */
int frpc_batch_begin(frpc_agent *agent);
int frpc_batch_end(frpc_agent *agent);

/*
 * Waits until f completes or timeout_ms passes (see "Timeouts"), driving
 * progress like frpc_call. Returns the call's status (0 or its FRPC_E*
 * code) when it completed; FRPC_ETIMEDOUT when the wait ran out with f
 * still in flight (frpc_future_test(f) is then 0; wait again or cancel);
 * FRPC_EDEADLK at once past the nesting limit (see frpc_call);
 * FRPC_EINVAL for a NULL f. Blocks.
 */
int frpc_future_wait(frpc_future *f, int timeout_ms);

/* 1 if f has completed, 0 if not (or f is NULL). Never blocks; does not
 * drive progress. */
int frpc_future_test(const frpc_future *f);

/* The reply when f completed with status 0 (owned by f, valid until
 * frpc_future_free or frpc_future_take, which moves it out; NULL when
 * empty, not completed, taken, or f is NULL); len may be NULL. */
const void *frpc_future_data(const frpc_future *f, size_t *len);

/*
 * The status of a completed f (0 or FRPC_E*), FRPC_EINPROGRESS while in
 * flight, FRPC_EINVAL for a NULL f.
 * remote_code (may be NULL) gets the handler's code for FRPC_EREMOTE;
 * message (may be NULL) the explanation, owned by f until frpc_future_free
 * or frpc_future_take (NULL when status is 0, or once taken).
 */
int frpc_future_error(const frpc_future *f, int *remote_code,
                      const char **message);

/* Moves f's outcome into *res (the caller then owns it; clear it with
 * frpc_result_clear) and returns its status; f keeps its status but no
 * longer its data or message. FRPC_EINPROGRESS while in flight (res
 * untouched), FRPC_EINVAL for NULL arguments. FRPC_ENOMEM
 * if a small reply, which f keeps inside itself, could not be copied
 * out; f and *res are then unchanged. */
int frpc_future_take(frpc_future *f, frpc_result *res);

typedef void (*frpc_future_fn)(frpc_future *f, void *user);

/*
 * Calls fn(f, user) exactly once when f completes: on the thread pool, or
 * at once on this thread if f has completed already. When the pool's
 * queue is full (config.queue_len), it runs instead on the thread that
 * completes f: a polling thread, or one that cancels or frees f, which
 * then runs fn before it returns. On a polling thread fn is as an
 * FRPC_INLINE handler: a call it makes polls, which may run other
 * futures' callbacks inside it, so such calls nest and past the nesting
 * limit end FRPC_EDEADLK (a config.queue_len above the number of futures
 * in flight keeps callbacks on the pool). Once frpc_shutdown has stopped the
 * pool, it runs on the thread that completes f: for a lent future
 * (frpc_call_async_lent) that the shutdown ends, one of the agent's own
 * threads or the one calling frpc_shutdown, before it returns. f completes before fn runs: a wait
 * on f (or frpc_future_test) may return while fn has yet to run or is
 * still running, so what fn touches is not the waiter's to free then;
 * frpc_shutdown returns only after it. fn may read f and may free it. One
 * callback per future: FRPC_EEXIST for a second one. If f is cancelled,
 * fn still runs and sees FRPC_ECANCELED. Neither the caller nor a thread
 * that cancels or frees f may hold a lock that fn takes. 0, FRPC_EEXIST,
 * or FRPC_EINVAL (NULL f or fn).
 */
int frpc_future_then(frpc_future *f, frpc_future_fn fn, void *user);

/*
 * Cancels f if it is still in flight: it completes with FRPC_ECANCELED and
 * a late answer is dropped (the callee may still run the handler). Returns
 * 0 if this cancelled it, 1 if f's call had ended already (its outcome
 * stands: not an error, since completion may always win the race; a lent
 * future whose call ended may still wait for its args, see
 * frpc_call_async_lent, and frpc_future_test says 0 until it is done),
 * FRPC_EINVAL for a NULL f. Never blocks itself, but may run f's
 * callback before it returns (see frpc_future_then), and then takes as
 * long as the callback does.
 */
int frpc_future_cancel(frpc_future *f);

/*
 * Frees f in any state: a future still in flight is cancelled first (its
 * callback, if any, then runs with FRPC_ECANCELED, perhaps on this thread
 * before frpc_future_free returns: see frpc_future_then). With a callback
 * pending or running, f stays valid until the callback returns. Call it
 * exactly once per future: from its owner, or from its callback when the
 * owner hands ownership to it. NULL is a no-op. Futures outlive
 * frpc_shutdown: all are complete by then, and may still be read,
 * waited for, cancelled (1) and freed.
 */
void frpc_future_free(frpc_future *f);

/*
 * Waits until every one of the n futures has completed, or timeout_ms
 * passes (see "Timeouts"). Returns 0 when all completed (their own
 * statuses are read with frpc_future_error), FRPC_ETIMEDOUT if some are
 * still in flight, FRPC_EDEADLK past the nesting limit (see frpc_call),
 * FRPC_EINVAL for bad arguments. NULL entries are skipped (all NULL, or
 * n == 0: 0 at once). The futures may be of several agents: the wait
 * drives the agent of the first one still in flight (its default timeout
 * and nesting limit apply; an agent shut down is not used), and may see
 * those of other agents complete up to about 20 ms late. Blocks.
 */
int frpc_wait_all(frpc_future *const *futures, size_t n, int timeout_ms);

/*
 * Waits until at least one of the n futures has completed, or timeout_ms
 * passes (see "Timeouts"). Returns 0 and sets *index to the lowest
 * completed one, or FRPC_ETIMEDOUT (none completed in time; *index
 * untouched), FRPC_EDEADLK past the nesting limit, FRPC_EINVAL (NULL
 * index, NULL futures with n > 0, or no future to wait for: n == 0 or
 * all NULL). NULL entries are skipped. Futures of several agents: as for
 * frpc_wait_all. Blocks. Cost: each return looks
 * at the futures from index 0 up to the one it gives (while none is done,
 * it looks again only after some call of the agent completed), so a
 * sliding window of w calls that always replaces the lowest done pays up
 * to w looks per call; one that keeps its calls in start order and waits
 * for the oldest with frpc_future_wait pays one (fabrpc-bench's rate
 * does; docs/PERFORMANCE.md has the figures).
 */
int frpc_wait_any(frpc_future *const *futures, size_t n, int timeout_ms,
                  size_t *index);

/* ------------------------------------------------------------------ */
/* Registered memory and one-sided transfers                           */
/* ------------------------------------------------------------------ */

/*
 * Since 1.1, as is everything up to "Statistics" (the emulation, "Native
 * or emulated" below, since 1.2).
 *
 * A rank registers a region of its memory, turns a slice of it into a
 * descriptor (FRPC_MEM_DESC_SIZE plain bytes, to send inside call args or
 * a reply), and a peer holding the descriptor reads the slice (frpc_get)
 * or writes it (frpc_put) without any handler of the owner running. The
 * local side of a transfer is a region of the caller's own, so the bytes
 * move straight between the two regions, copied by the provider only
 * (natively; see "Native or emulated" below).
 *
 * Trust: a descriptor is checked before anything is posted. Its check
 * value is keyed with the job's token: random or truncated bytes, or
 * bytes whose fixed fields (in bytes 0-7 and 48-55 of the 64: the format
 * mark, the version, and the bits no descriptor sets) are not a
 * descriptor's, whoever altered them (FRPC_EPROTO), and any other byte
 * or bit altered (the access and flag bits a descriptor may carry
 * included) or another job's descriptors (FRPC_EACCES: the check value
 * does not match) are refused,
 * as are a
 * rank outside the job (FRPC_ENORANK), a slice outside the described one
 * (FRPC_EINVAL) and an access the owner did not grant (FRPC_EACCES). A
 * descriptor of a region since deregistered is refused: natively on
 * shm before anything is posted (FRPC_EACCES, returned by the call
 * itself, async forms included; see "Native shm" below), emulated by the
 * owner (the transfer ends FRPC_EACCES), natively elsewhere by the
 * owner's provider (FRPC_EACCES or FRPC_ETRANSPORT, or at its timeout on
 * a provider that never answers); the agent keeps working either way. Natively over tcp the owner's
 * provider refuses it by dropping the connection between the two ranks,
 * and what else was on it, either way, is lost with it: each call,
 * transfer or notification in flight between the two ranks (from either
 * side) then ends as it would have, if it completes within about a
 * second, or with FRPC_ETRANSPORT ("the connection ... dropped in
 * flight": it may or may not have run), never at its own timeout; what
 * is sent later goes on a new connection. Nothing is sent twice.
 * Native shm (since 1.5): its provider (libfabric 1.17) checks no key
 * and copies straight from or into the owner's memory, so fabrpc checks
 * instead: each rank lists its regions in shared memory (up to 1024
 * registered at once), a transfer checks that its remote region is
 * still listed before it posts and holds the listing until the provider
 * is done with it, and frpc_mem_deregister waits for those holds as it
 * waits for its own transfers (same timeout, FRPC_ETIMEDOUT likewise;
 * meanwhile new transfers to the region are refused). So no transfer
 * touches a region's memory after frpc_mem_deregister returned 0, nor
 * after frpc_shutdown returned (it waits for the holds on all of the
 * rank's regions at most a second: past that, one a stopped peer keeps
 * is left). A
 * region registered while 1024 others are is not listed: its
 * descriptors say it is served by messages, as emulated ones are
 * ("Native or emulated"), correct but slower. Where the owner's memory
 * is gone under a listed region (unmapped while registered, against the
 * rule above, or the owner died mid-copy), the provider's copy fails and
 * does not say which: the transfer ends FRPC_EACCES within about a
 * second, or FRPC_EPEERLOST if the owner is found dead meanwhile, its
 * local region free at once. Native udp (FABRPC_RMA=native) never ends a
 * transfer its owner refuses, and jams the two ranks (below).
 *
 * Native or emulated (config.rma, FABRPC_RMA; frpc_backend_report says
 * which, and why): natively the provider moves the bytes (RMA reads and
 * writes) and no code of the owner's runs; but where the provider moves
 * them in software, in the owner's polls (tcp, libfabric 1.17: a get from
 * an owner whose polling thread an inline handler held for 3 s ended at
 * its 1 s timeout), a native transfer waits for the owner's poll as an
 * emulated one does. Native shm's complete without the owner, but each
 * holds one of the 1024 entries of the owner's command queue until the
 * owner polls (libfabric 1.17): past about 1024 transfers since its last
 * poll (fewer while messages to it wait there too), they wait for its
 * poll as well, so that a stopped owner's end at their timeout
 * (FRPC_ETIMEDOUT) and work again once it resumes.
 * Emulated, the same calls send
 * requests to fabrpc's own functions on the owner ("frpc.get",
 * "frpc.put", run on its polling thread as FRPC_INLINE handlers are; no
 * handler of the application runs), which check the descriptor again,
 * find the region by an id never reused (so a deregistered region's
 * descriptor gets FRPC_EACCES on every provider, shm included, and no
 * memory is touched after frpc_mem_deregister returns), and copy the
 * bytes. Everything else below holds for both: completion, errors,
 * timeouts, cancel, FRPC_EPEERLOST, batches, notifications, and
 * frpc_mem_deregister's wait. Emulated transfers move in pieces of at
 * most 4 MiB (less when config.max_msg_size is smaller), 16 MiB of a
 * transfer in flight at once, each piece a call of its own in frpc_stats;
 * they cost more copies and a round trip per piece, and need the owner to
 * poll (its progress thread does; an inline handler that holds the
 * owner's poll holds them too, up to their timeout). Pieces in flight
 * count toward config.max_inflight for the calls started meanwhile. A
 * config.max_msg_size of FRPC_MEM_DESC_SIZE + 16 bytes or less leaves no
 * room for a piece (FRPC_ETOOBIG); a piece refused by the owner (for
 * instance config.max_msg_size smaller there) fails the transfer with the
 * owner's code. Ranks in different modes work together: a descriptor
 * says how its owner serves it, and a transfer is emulated when either
 * side is.
 * What is not emulated: fabrpc's calls themselves still use the
 * provider's RMA for payloads over the eager size (rendezvous), so every
 * provider fabrpc opens has FI_RMA (it asks for it); one without it does
 * not come up, and frpc_backend_report says that it lacks FI_RMA where
 * it was named in the provider list. "emulated (provider X refused a test
 * registration ...)" means the provider's RMA did not work for a region
 * at init; large calls may then fail with FRPC_ETRANSPORT as well.
 * "emulated (provider sockets: its RMA can stall ...)": auto does not use
 * sockets' RMA for transfers (FABRPC_RMA=native does): under load its
 * reader can leave a TCP window shut, and the transfer then waits for the
 * kernel's zero-window probes, minutes apart, or its timeout.
 * "emulated (provider udp;ofi_rxd: an RMA its owner refuses ...)": nor
 * does auto use udp's (FABRPC_RMA=native does): its ofi_rxd layer
 * (libfabric 1.17) never ends a transfer whose key the owner refuses (a
 * stale descriptor's), and every later frame between the two ranks
 * waits behind it: their calls end at their timeouts, for ever.
 *
 * Completion: a get that returns 0 has the bytes in the local region; a
 * put that returns 0 has them in the owner's memory, visible to whatever
 * the owner does next (a call sent after it sees them). A transfer whose
 * owner is lost ends with FRPC_EPEERLOST within the detection bound.
 * Transfers are counted in frpc_stats with calls (calls_started and the
 * outcomes), and on their own in the transfer counters.
 */
typedef struct frpc_mem frpc_mem; /* since 1.1 */

/* Access a region grants its peers (since 1.1). */
enum {
    FRPC_MEM_REMOTE_READ = 1,  /* peers may frpc_get from it */
    FRPC_MEM_REMOTE_WRITE = 2  /* peers may frpc_put into it */
};

#define FRPC_MEM_DESC_SIZE 64 /* since 1.1 */

/*
 * Registers buf[0..len) with the agent's provider for transfers: as the
 * local side of this rank's frpc_get/frpc_put always, and for peers'
 * transfers as access says (a mix of FRPC_MEM_REMOTE_*, or 0). The caller
 * keeps owning buf and must keep it valid until frpc_mem_deregister
 * returns 0 (a file mapped there must not shrink meanwhile: its pages
 * past the new end would raise SIGBUS in this process when a transfer
 * touched them). (Where this rank's transfers are emulated, nothing is
 * registered with the provider: fabrpc copies.) *out is the caller's,
 * freed by frpc_mem_deregister; on an error it is NULL (when out is not).
 * Errors: FRPC_EINVAL (NULL agent, buf or out, len 0, unknown access
 * bits; buf[0..len) not wholly memory this process may read: unmapped
 * bytes, unreadable pages, pages of a file mapped past the file's end
 * (seen through /proc/self; a file deleted since it was mapped only with
 * CAP_SYS_ADMIN) and the kernel's [vvar] pages (they raise SIGBUS; since
 * 1.5), a range wrapping the address space; and FRPC_MEM_REMOTE_WRITE on
 * memory this process may not write: a peer's put would kill it),
 * FRPC_ESHUTDOWN, FRPC_ENOMEM, FRPC_ETRANSPORT (the provider refused,
 * e.g. past the locked-memory limit).
 * May block briefly (the provider pins pages); any thread. Since 1.1.
 */
int frpc_mem_register(frpc_agent *agent, void *buf, size_t len, int access,
                      frpc_mem **out);

/*
 * Ends mem's registration and frees mem. Transfers of this rank that use
 * mem as their local side and are still in the provider's hands (or,
 * emulated, have pieces out), and peers' emulated requests copying from
 * or into mem now, are waited for, up to timeout_ms (see "Timeouts"):
 * FRPC_ETIMEDOUT if some still are then; mem stays registered and valid,
 * and the call may be made again. (A transfer whose call already ended,
 * by its timeout or a cancel, may still be in the provider's hands: the
 * provider could still write into the region.) Transfers to a rank
 * marked lost are not waited for. Natively on shm, peers' transfers on
 * mem that passed their check are waited for too (see "Native shm"
 * above; a peer marked lost is not), and a peer's transfer completes
 * only in its polls: one whose progress is held past timeout_ms makes
 * this FRPC_ETIMEDOUT. Where this rank's provider moves the bytes of
 * peers' native transfers itself (tcp, sockets), it may still serve
 * those it took before the registration closed: the registration is
 * closed first, then each peer not lost is asked, and answers once it
 * has no transfer to this rank out (since 1.5; 1.4 ranks answer at
 * once): a peer stopped, or that does not answer by timeout_ms, makes
 * this FRPC_ETIMEDOUT, mem then closed already (its descriptors stale,
 * this rank's own transfers with it refused FRPC_EINVAL, of 0 bytes
 * too) but valid, to
 * be deregistered again. A region that gives peers no access
 * (access 0), or a world of one, asks no one. Peers' descriptors of mem
 * become stale: their transfers fail; those already under way end 0
 * with the bytes mem held, or fail.
 * After frpc_shutdown, which ends every registration, this only frees
 * mem. Returns 0, FRPC_ETIMEDOUT, FRPC_ESHUTDOWN (frpc_shutdown, on
 * another thread, ended the transfers waited for: mem stays as for
 * FRPC_ETIMEDOUT, to be freed by a call after frpc_shutdown returned), or
 * FRPC_EINVAL (NULL mem). Blocks, from a handler too: where a wait for
 * calls would fail FRPC_EDEADLK (the pool handler of config.threads 1)
 * it polls instead, and never fails so (1.5;
 * before, asking the peers there ended FRPC_ETIMEDOUT at once). A peer
 * answers the question on the thread that polls, not its pool, so two
 * ranks of config.threads 1 that deregister in pool handlers at once do
 * not wait for each other. Since 1.1.
 */
int frpc_mem_deregister(frpc_mem *mem, int timeout_ms);

/*
 * Writes into out[0..FRPC_MEM_DESC_SIZE) the descriptor of mem's bytes
 * [offset, offset + len), with mem's remote access. The bytes are plain
 * (no pointer to follow) and mean something only to ranks of this job.
 * Errors: FRPC_EINVAL (NULL mem or out, a slice not inside mem, len 0),
 * FRPC_ESHUTDOWN (after frpc_shutdown). Never blocks. Since 1.1.
 */
int frpc_mem_describe(const frpc_mem *mem, size_t offset, size_t len,
                      void *out);

/*
 * Reads len bytes at remote_off in the slice that desc (desc_len bytes,
 * from frpc_mem_describe on the owner rank; the caller's, read during the
 * call only, also by the async forms) describes, into local's bytes at
 * local_off. No handler of the owner's application runs (emulated:
 * fabrpc's own, see above). timeout_ms as for calls (see "Timeouts").
 * Returns 0 when the bytes are in local; len 0 is 0 at once, nothing
 * posted, but its arguments are checked all the same (a bad descriptor
 * or slice is refused whatever len; whether the region is still
 * registered is not asked, on any provider: a stale descriptor's len 0
 * is 0 too). Errors:
 * FRPC_EINVAL (NULL local or desc, local slice outside local, remote
 * slice outside the descriptor's; for a get, local on memory this
 * process could not write when it was registered), FRPC_EPROTO (desc is not a
 * descriptor: wrong size or format, its fixed fields included), FRPC_EACCES
 * (its check value does not match: another byte tampered with, or another
 * job's; no remote read granted; or the
 * owner (its provider, or emulated its fabrpc) refused the access, as for
 * a deregistered region), FRPC_ENORANK, FRPC_EPEERLOST, FRPC_ETIMEDOUT,
 * FRPC_ETRANSPORT (also a deregistered region's, natively over tcp: see
 * "Trust" above), FRPC_ESHUTDOWN,
 * FRPC_EDEADLK (nesting limit, as frpc_call), FRPC_EAGAIN (max_inflight
 * calls and transfers in flight already, as for frpc_call), FRPC_ENOMEM,
 * FRPC_ETOOBIG (emulated only: this rank's config.max_msg_size leaves no
 * room for a piece, or the owner's is too small for one; see "Native or
 * emulated"). Blocks. The sync forms give only the code; the words
 * behind it, where there are any (the owner's refusal, the provider's
 * text, which connection dropped), come with the async forms, from
 * frpc_future_error. Since 1.1.
 */
int frpc_get(frpc_mem *local, size_t local_off, const void *desc,
             size_t desc_len, size_t remote_off, size_t len, int timeout_ms);

/* frpc_get's other direction: writes local's bytes [local_off, +len) into
 * the described slice at remote_off; needs FRPC_MEM_REMOTE_WRITE. Returns
 * 0 once the bytes are in the owner's memory. Same errors. Blocks.
 * Since 1.1. */
int frpc_put(frpc_mem *local, size_t local_off, const void *desc,
             size_t desc_len, size_t remote_off, size_t len, int timeout_ms);

/*
 * frpc_get and frpc_put without waiting: on 0, *out is a future that
 * completes as the sync form would return (its data is empty; wait, then,
 * cancel and free work as on calls). A cancelled or timed-out transfer may
 * still be in the provider's hands: frpc_mem_deregister waits for it. On
 * an error *out is NULL and nothing was posted (the sync form's errors
 * that can be known at once; the others end the future). Never waits for
 * the network unless the provider has no room (bounded by timeout_ms).
 * Provider note: shm (libfabric 1.17) copies the bytes itself while the
 * transfer is posted (process_vm_readv/writev), so there the async forms
 * return once the bytes have moved, the future completing at the next
 * poll (past timeout_ms, once the 4 MiB piece being copied then has: the
 * rest is not posted, and the future ends FRPC_ETIMEDOUT). Since 1.1.
 */
int frpc_get_async(frpc_mem *local, size_t local_off, const void *desc,
                   size_t desc_len, size_t remote_off, size_t len,
                   int timeout_ms, frpc_future **out);
int frpc_put_async(frpc_mem *local, size_t local_off, const void *desc,
                   size_t desc_len, size_t remote_off, size_t len,
                   int timeout_ms, frpc_future **out);

/*
 * Puts a descriptor into msgpack as a bin of FRPC_MEM_DESC_SIZE bytes
 * (frpc_mem_describe's), for call args or a reply; the receiver passes
 * the bin's bytes (obj.via.bin.ptr, .size) to frpc_get/frpc_put as they
 * are: they are checked there. Errors: frpc_mem_describe's, and
 * FRPC_ENOMEM (the packer's write failed: nothing of the bin was
 * written, since 1.5). Never blocks. Since 1.1.
 */
int frpc_mp_pack_mem(msgpack_packer *pk, const frpc_mem *mem, size_t offset,
                     size_t len);

/*
 * Batches: many gets and puts to one owner rank, checked, posted back to
 * back (the owner's doorbell rung once for them all where its provider
 * needs its polls) and ended as one. Each op is as for frpc_get/frpc_put
 * and is checked the same way before anything is posted: if one is bad,
 * nothing is posted and the call returns its code. Ops may overlap in the
 * local regions (gets into overlapping bytes land in no defined order).
 *
 * notify (notify_len bytes, at most FRPC_NOTIFY_MAX; NULL when 0) is sent
 * to the owner once every op has completed (notify_len 0: no notification
 * at all, whatever notify is; unlike frpc_notify, a batch cannot send an
 * empty one), so the owner, taking it (see
 * frpc_notify_wait), finds the bytes of the batch's puts in its memory.
 * No op failing, the batch ends 0 when the owner has the notification
 * (queued, or handed to its callback), or with the code the owner sent
 * back (FRPC_EAGAIN: its queue was full; FRPC_ETOOBIG: notify_len is
 * over its config.max_msg_size; FRPC_EPEERLOST: its shutdown had begun,
 * see frpc_notify). An op failing, the batch ends
 * with the first failure and sends nothing. A batch whose wait ended
 * (timeout, cancel) while its data was already on the way may still
 * notify.
 *
 * The ops array is the caller's and is read only during the call. Its
 * element size comes from the macro (see "Version and ABI").
 *
 * frpc_xfer, FRPC_XFER_GET and FRPC_XFER_PUT: since 1.1.
 */
enum {
    FRPC_XFER_GET = 0, /* owner's slice -> local */
    FRPC_XFER_PUT = 1  /* local -> owner's slice */
};

typedef struct frpc_xfer {
    int op;                /* FRPC_XFER_GET or FRPC_XFER_PUT */
    frpc_mem *local;       /* every op's region of one agent */
    size_t local_off;
    const void *desc;      /* from frpc_mem_describe on the owner */
    size_t desc_len;
    size_t remote_off;     /* in the described slice */
    size_t len;            /* 0: the op moves nothing */
    /* new fields go here, and only here */
} frpc_xfer;

/* Largest notification, in bytes (since 1.1). */
#define FRPC_NOTIFY_MAX 512

/*
 * Runs the batch ops[0..n) and waits for it, up to timeout_ms (see
 * "Timeouts"). Returns 0, or: FRPC_EINVAL (NULL or empty ops, an unknown
 * op, a NULL region, regions of two agents, descriptors of two owners,
 * notify_len over FRPC_NOTIFY_MAX, notify NULL with notify_len > 0), any
 * code of frpc_get/frpc_put (ops are checked in order, and the first
 * bad one decides the code, whichever of these it is), and, with a
 * notification, FRPC_EAGAIN (the owner's queue is full) and FRPC_ETOOBIG
 * (notify_len over this rank's config.max_msg_size: refused before
 * anything is posted; or over the owner's: sent back by the owner once
 * the data has landed). Emulated, FRPC_ETOOBIG may also be a piece of
 * the data refused by an owner whose config.max_msg_size is smaller than
 * this rank's (see "Native or emulated"): then some of the data may not
 * have landed, and the notification was not sent. Blocks. Since 1.1
 * (frpc_transfer and frpc_transfer_sized).
 */
#define frpc_transfer(ops, n, notify, notify_len, timeout_ms)                 \
    frpc_transfer_sized((ops), (n), sizeof(*(ops)), (notify), (notify_len),  \
                        (timeout_ms))
int frpc_transfer_sized(const frpc_xfer *ops, size_t n, size_t op_size,
                        const void *notify, size_t notify_len,
                        int timeout_ms);

/* frpc_transfer without waiting: on 0, *out is a future that completes as
 * frpc_transfer would return (empty data). On an error *out is NULL and
 * nothing was posted. Never waits for the network unless the provider has
 * no room (bounded by timeout_ms). Since 1.1 (frpc_transfer_async and
 * frpc_transfer_async_sized). */
#define frpc_transfer_async(ops, n, notify, notify_len, timeout_ms, out)      \
    frpc_transfer_async_sized((ops), (n), sizeof(*(ops)), (notify),          \
                              (notify_len), (timeout_ms), (out))
int frpc_transfer_async_sized(const frpc_xfer *ops, size_t n, size_t op_size,
                              const void *notify, size_t notify_len,
                              int timeout_ms, frpc_future **out);

/*
 * Notifications: small messages (up to FRPC_NOTIFY_MAX bytes) that a rank
 * takes when it is ready, with no handler of its own running: alone
 * (frpc_notify), or after a batch's data (frpc_transfer). From one source
 * they are taken in the order the source sent them (a batch's is sent
 * when its data has landed, so async batches in flight at once notify in
 * the order they finish, which may not be the order they were started).
 * A rank holds up to config.notify_queue
 * untaken; past that a sender gets FRPC_EAGAIN and nothing is lost.
 * Once its shutdown begins it takes none (frpc_notify_wait), as though
 * it had left, and its senders are told so.
 * Since 1.1.
 */

/* Sends msg (len bytes, the caller's, copied) to rank dst, and waits, up
 * to timeout_ms (see "Timeouts"), until dst has it: queued there, or,
 * with an frpc_on_notify fn set there, handed to fn and fn returned (so
 * a slow fn holds this wait, and its timeout may end it first with
 * FRPC_ETIMEDOUT though fn has the notification). Returns 0, or
 * FRPC_EINVAL (NULL agent, msg NULL with len > 0, len over
 * FRPC_NOTIFY_MAX), FRPC_ENORANK, FRPC_EAGAIN (dst's queue is full, or
 * dst had no memory to queue it, or max_inflight calls in flight),
 * FRPC_ETOOBIG (len over this rank's or
 * dst's config.max_msg_size, where one is set below FRPC_NOTIFY_MAX),
 * FRPC_EPEERLOST (also when dst's shutdown has begun and it has no
 * frpc_on_notify fn: it takes no more notifications, since 1.5),
 * FRPC_ETIMEDOUT (dst did not confirm in time: it may
 * still get the notification, as a call that timed out may still run),
 * FRPC_ESHUTDOWN, FRPC_ETRANSPORT, FRPC_EDEADLK, FRPC_ENOMEM, FRPC_EPROTO
 * (as for frpc_call: a code this library does not know). Sending to
 * itself works. Blocks. Since 1.1. */
int frpc_notify(frpc_agent *agent, int dst, const void *msg, size_t len,
                int timeout_ms);

/*
 * Takes this rank's oldest notification: its source in *src (if src is
 * not NULL), its length in *len, its bytes in buf[0..cap). Waits up to
 * timeout_ms (see "Timeouts": 0 is the agent's default, not a poll; the
 * shortest wait is 1 ms) for one to arrive. Returns 0, or
 * FRPC_ETOOBIG (cap is smaller than *len: the notification stays, take it
 * with a larger buf), FRPC_ETIMEDOUT (none came), FRPC_ESHUTDOWN (none
 * left, and frpc_shutdown began, perhaps on another thread while this
 * one waited; final since 1.5: from then on this rank refuses
 * notifications, their senders told FRPC_EPEERLOST, unless an
 * frpc_on_notify fn is set, which still gets them; those queued and not
 * taken when frpc_shutdown returns are dropped, their senders having
 * been told 0), FRPC_EINVAL (NULL
 * agent or len, buf NULL with cap > 0), FRPC_EDEADLK (nesting limit, as
 * frpc_call). The wait is for any
 * sender, so a lost rank does not end it: wait with a timeout where the
 * sender may die. Any thread; several may wait, each notification goes
 * to one. May block. Since 1.1.
 */
int frpc_notify_wait(frpc_agent *agent, int *src, void *buf, size_t cap,
                     size_t *len, int timeout_ms);

/*
 * With fn set, notifications that arrive from now on go to fn instead of
 * the queue: fn(agent, src, msg, len, user) runs on the polling thread as
 * each arrives, in order, as an FRPC_INLINE handler does: it must be
 * short and must not block, but may make calls as such handlers may (a
 * wait in it polls, so a notification that arrives meanwhile runs fn
 * again, nested, on this thread). msg is valid during the call only. user is
 * passed to fn as is (the caller's). Notifications already queued stay
 * for frpc_notify_wait. fn NULL: back to queueing. Once it returns, the
 * previous fn is not running and is not called again (but for a call
 * from inside fn itself, whose own run goes on), so what its user points
 * to may be freed: it waits for a run on another thread to return, which
 * is short. Called from a thread that runs this agent's handlers (a pool
 * handler, an FRPC_INLINE handler or a callback) while a run of fn on
 * another thread waits in a call, it does not wait: that call may need
 * this very handler's answer; it returns FRPC_EDEADLK, says so on
 * stderr, and the previous fn stays set. Errors: FRPC_EINVAL (NULL
 * agent), FRPC_EDEADLK (above). Any thread, including fn. Since 1.1
 * (frpc_on_notify and frpc_notify_fn); waits for a running fn since 1.4.
 */
typedef void (*frpc_notify_fn)(frpc_agent *agent, int src, const void *msg,
                               size_t len, void *user);
int frpc_on_notify(frpc_agent *agent, frpc_notify_fn fn, void *user);

/* ------------------------------------------------------------------ */
/* Statistics                                                          */
/* ------------------------------------------------------------------ */

/*
 * Counters since frpc_init. Invariant for the calling side:
 * calls_started == calls_ok + calls_remote_error + calls_timed_out +
 * calls_cancelled + calls_failed + calls_in_flight (read at a quiet
 * moment; while calls run the fields are read one by one).
 * The calls_ fields count more than the application's frpc_call*: each
 * frpc_notify, each one-sided transfer or batch (frpc_get, frpc_put,
 * frpc_transfer and their _async, native or emulated) is one call with
 * one outcome (but a frpc_get or frpc_put of len 0, which posts nothing,
 * is none; an _async form of len 0, and a batch with no byte to move and
 * no notification, are one each, ended at once with 0: their future),
 * an emulated transfer also one call per piece it moves
 * (which its owner counts in requests_received and requests_answered),
 * and so are fabrpc's own calls (such as frpc_shutdown's goodbyes and
 * announcements of its leaving, and the word a rank sends a peer whose
 * tcp connection dropped under a transfer: its first tries have short
 * timeouts and may end in calls_timed_out or calls_failed although no
 * call of the application's did).
 */
typedef struct frpc_stats {
    uint64_t calls_started;      /* calls begun (sync and async; see
                                    above for what counts as one): those
                                    sent, and those that passed the
                                    argument checks but ended before
                                    sending (a destination already lost:
                                    FRPC_EPEERLOST, counted in
                                    calls_failed) */
    uint64_t calls_ok;
    uint64_t calls_remote_error; /* FRPC_EREMOTE */
    uint64_t calls_timed_out;
    uint64_t calls_cancelled;    /* cancelled, freed while in flight */
    uint64_t calls_failed;       /* any other error of a call begun */
    uint64_t calls_in_flight;
    uint64_t answers_dropped;    /* late or unknown answers */
    uint64_t requests_received;  /* handed to handlers, and those
                                    refused (FRPC_ESHUTDOWN) once a
                                    shutdown's pool takes no more */
    uint64_t requests_answered;  /* of requests_received, those answered
                                    (by a handler, or by fabrpc for it,
                                    such a refusal too), sent or not */
    uint64_t frames_malformed;   /* dropped: failed to decode */
    uint64_t frames_bad_token;   /* dropped: another job's token */
    uint64_t frames_stranger;    /* dropped: from an address that is not
                                    the member rank it claims to be */
    uint64_t frames_oversize;    /* dropped: messages larger than any
                                    frame fabrpc sends eagerly */
    uint64_t frames_from_lost;   /* dropped: from a rank marked lost */
    uint64_t peers_lost;         /* ranks marked lost (frpc_peer_state) */
    uint64_t bytes_sent, bytes_received; /* frames sent and received as
                                    messages, headers included, each
                                    once however it went (alone, in
                                    parts, sharing a message). Args and
                                    replies the peer reads from this
                                    rank's memory (lent or given, see
                                    zerocopy_sent, or too large for one
                                    message) count only the small frame
                                    that says where they are; one-sided
                                    transfers count in transfer_bytes */
    uint64_t messages_sent;      /* transport messages; small frames to
                                    one rank may share one (config
                                    .coalesce says when; a burst may
                                    also go frame by frame) */
    uint64_t frames_coalesced;   /* frames that shared another's message */
    uint64_t recv_repost_failed; /* times the provider refused to take a
                                    receive buffer back (it is offered
                                    again at the next polls, each refusal
                                    counted: none is lost) */
    uint64_t cq_errors_unmatched; /* provider error reports that named no
                                    operation of ours */
    uint64_t transfers_get;      /* gets posted: frpc_get(_async), and
                                    each op of a batch that moves bytes,
                                    as it is posted (emulated: its first
                                    piece sent); not those a batch's
                                    deadline kept back (since 1.1; until
                                    1.5 those counted too) */
    uint64_t transfers_put;      /* puts posted, likewise (since 1.1) */
    uint64_t transfer_bytes;     /* bytes moved by transfers: each
                                    piece that completed, also of one
                                    cancelled, timed out or refused part
                                    way (a batch whose deadline kept ops
                                    back counts those it moved; since
                                    1.5), but none of one that ended with
                                    a transport error (since 1.1) */
    uint64_t transfers_refused;  /* refused before posting: bad descriptor
                                    or slice, access not granted, a
                                    batch naming two owners (not
                                    FRPC_EAGAIN nor FRPC_ESHUTDOWN, nor a
                                    NULL region or descriptor)
                                    (since 1.1) */
    uint64_t mem_registered;     /* regions registered now (since 1.1) */
    uint64_t transfer_batches;   /* frpc_transfer(_async) posted, one
                                    with no byte to move too (since
                                    1.1) */
    uint64_t notifications_sent; /* frpc_notify's taken by their target
                                    (answered); batches' sent once their
                                    data landed (taken or refused: the
                                    batch's own outcome says) (since
                                    1.1) */
    uint64_t notifications_received; /* queued here, or given to the
                                        callback (since 1.1) */
    uint64_t notifications_refused;  /* refused here: queue full, no
                                        memory to queue one, or (since
                                        1.5) shutdown begun (since
                                        1.1) */
    uint64_t zerocopy_sent;      /* args and replies that went without a
                                    copy (see config.zerocopy_min); since
                                    1.2 */
    uint64_t requests_duplicate; /* dropped: a request the provider
                                    delivered again (udp; its handler ran
                                    once); since 1.4 */
    uint64_t handlers_on_progress; /* pool handlers (frpc_register flags
                                    0) the progress thread ran itself, the
                                    pool being idle (see FRPC_INLINE);
                                    since 1.5 */
    uint64_t progress_stand_ins; /* times such a handler ran a tick (about
                                    1 ms) or more and another thread
                                    polled in the progress thread's place
                                    until it returned; since 1.5. Both
                                    depend on timing and on how many
                                    requests one poll takes (the
                                    provider's): a sign of where
                                    handlers ran, not a count to expect */
    /* new fields go here, and only here */
} frpc_stats;

/* Fills *out: the fields the program knows of (its sizeof(frpc_stats),
 * taken by the macro; see "Version and ABI"). FRPC_EINVAL for NULL
 * arguments, a size smaller than the first frpc_stats or over 1024 bytes.
 * Never blocks. */
#define frpc_get_stats(agent, out)                                            \
    frpc_get_stats_sized((agent), (out), sizeof(*(out)))
int frpc_get_stats_sized(const frpc_agent *agent, frpc_stats *out,
                         size_t size);

/*
 * Per-function figures (since 1.4), kept for each function name this rank
 * called, registered or answered, up to FRPC_FN_STATS_MAX names (in the
 * order first seen; a name past that has none, and frpc_get_fn_stats
 * gives it zeros). fabrpc's own functions count too: frpc_notify's calls
 * appear as "frpc.notify" (on the receiver a batch's notification counts
 * there too; on its sender it does not: the batch is a transfer),
 * frpc_mem_deregister's questions to its peers (where their transfers
 * are native over tcp or sockets: not over shm, nor emulated) count as
 * calls to "frpc.fence" on the rank that asks (the peers that answer
 * count nothing for them), and a
 * fresh agent lists "fabrpc.internal.bye" (registered by frpc_init; one
 * of the FRPC_FN_STATS_MAX); a request for a name not registered here
 * (answered FRPC_ENOFUNC) counts on the caller's side only, since the
 * callee knows only its hash; one-sided transfers are not calls and are
 * not counted here, nor are an emulated transfer's pieces (frpc_stats
 * counts both). Times are CLOCK_MONOTONIC
 * nanoseconds, an answer's and a request's taken when the poll that
 * found it read the provider's queue. p50 and p99 come from a histogram
 * and are within 7% of the true percentile of the times counted, for
 * times under 2^40 ns (about 18 minutes: longer ones share the
 * histogram's last step, and a percentile that falls among them is only
 * kept within min and max); min and max are exact. An outcome counts
 * once it is known: a call in flight, or a request whose handler has not
 * answered yet, is in no figure. Each
 * side's figures (the caller's, the callee's) are read as of one moment,
 * even while calls end: they hold together (failures among the counted,
 * min <= p50 <= p99 <= max, the total between count x min and count x
 * max; all zero with a zero count). The two sides, and two names, may be
 * read at slightly different moments.
 */
#define FRPC_FN_STATS_MAX 1024

typedef struct frpc_fn_stats {
    /* This rank as the caller: its calls of this name, to any rank, sync
     * and async, that ended, whatever the outcome. */
    uint64_t calls;
    uint64_t calls_failed;   /* of them, ended with an error: a remote
                                one, a timeout, a cancel, a lost peer... */
    uint64_t call_ns_total;  /* start (frpc_call, frpc_call_async) to
                                end (the outcome known here), summed */
    uint64_t call_ns_min, call_ns_max, call_ns_p50, call_ns_p99;
    /* This rank as the callee: requests for its handler of this name that
     * were answered (frpc_respond*, or an error: by the handler, or by
     * fabrpc for it), timed from their arrival to the answer. A request
     * whose args pass this rank's max_msg_size is refused (FRPC_ETOOBIG)
     * before it is one, and is not counted here. */
    uint64_t handled;
    uint64_t handled_error;  /* of them, answered with an error */
    uint64_t handle_ns_total;
    uint64_t handle_ns_min, handle_ns_max, handle_ns_p50, handle_ns_p99;
    /* new fields go here, and only here */
} frpc_fn_stats;

/* Fills *out with the figures of function name (the fields the program
 * knows of, as frpc_get_stats): zeros for a name with none (never called
 * nor registered here, or past FRPC_FN_STATS_MAX). Errors: FRPC_EINVAL
 * (NULL argument, name empty or over 255 bytes, size smaller than the
 * first frpc_fn_stats or over 1024 bytes). Waits for no call, peer or lock: to read a
 * name's figures as of one moment it may spin while an update is under
 * way on another thread (a few hundred nanoseconds; if that thread lost
 * its core, at most 100 ms, after which it gives the figures it read,
 * made to hold together). Since 1.4. */
#define frpc_get_fn_stats(agent, name, out)                                   \
    frpc_get_fn_stats_sized((agent), (name), (out), sizeof(*(out)))
int frpc_get_fn_stats_sized(const frpc_agent *agent, const char *name,
                            frpc_fn_stats *out, size_t size);

/* The names that have figures: up to max of them into names[] (NULL
 * allowed when max is 0), in the order first seen. The strings belong to
 * the agent and stay valid until frpc_shutdown returns. Returns how many
 * names there are (more than max: call again with room), or FRPC_EINVAL
 * (NULL agent, max < 0, names NULL with max > 0). Never blocks. Since
 * 1.4. */
int frpc_fn_stats_names(const frpc_agent *agent, const char **names,
                        int max);

/* ------------------------------------------------------------------ */
/* msgpack helpers                                                      */
/* ------------------------------------------------------------------ */

/*
 * frpc_mp_view and frpc_mp_buf are made of msgpack-c's own types
 * (msgpack_object, msgpack_zone, msgpack_sbuffer, msgpack_packer), so
 * their size and layout are those of the msgpack-c the program is built
 * against (fabrpc.pc names it; configure takes 3.0 or later, and fabrpc
 * is built and tested with 4.x): the program and libfabrpc must use the
 * same one. They carry no size field and will not grow within fabrpc 1.x.
 */

/*
 * A parsed view of msgpack bytes. Strings and binaries in obj point into the
 * parsed buffer (no copy), so the buffer must outlive the view; arrays and
 * maps live in the view's zone. Free with frpc_mp_view_free.
 */
typedef struct frpc_mp_view {
    msgpack_object obj;
    msgpack_zone zone;
} frpc_mp_view;

/* Parses exactly one msgpack object filling all of buf[0..len). Errors:
 * FRPC_EINVAL (NULL view or buf with len > 0), FRPC_EPROTO (malformed,
 * truncated, empty, trailing bytes, or arrays/maps nested deeper than 64),
 * FRPC_ENOMEM. On error the view is left empty and needs no freeing
 * (freeing it is harmless). Memory used is at most 24 bytes per byte of
 * len, or 64 bytes for the shortest inputs (one zone chunk of
 * max(64, what the tree needs), plus at most 32 bytes of the zone's and
 * malloc's bookkeeping; a
 * msgpack_object per element: 16 MiB of one-byte elements takes
 * about 400 MB), whatever sizes the bytes claim, so untrusted input
 * cannot ask for more; bound len where that is too much. view's
 * old contents are not looked at (it may be uninitialised): free a view
 * that holds a parse before parsing into it again, or its zone leaks. */
int frpc_mp_parse(const void *buf, size_t len, frpc_mp_view *view);
/* Frees the view's zone and leaves it empty; NULL and an empty view are
 * no-ops, so freeing twice is harmless. */
void frpc_mp_view_free(frpc_mp_view *view);

/* frpc_mp_parse on a request's args (the view points into them: use it
 * before answering req). Errors: FRPC_EINVAL (NULL req or view), and
 * frpc_mp_parse's (FRPC_EPROTO: no args, or not one msgpack object). On
 * every error the view is left empty, as frpc_mp_parse leaves it. */
int frpc_request_unpack(const frpc_request *req, frpc_mp_view *view);

/* A growable buffer with a packer writing into it: init, pack with the
 * msgpack_pack_* functions on &p->pk, use p->sbuf.data / p->sbuf.size, then
 * destroy (which frees the data and leaves p empty and reusable; NULL is a
 * no-op). The msgpack_pack_* functions return -1 when memory runs out. */
typedef struct frpc_mp_buf {
    msgpack_sbuffer sbuf;
    msgpack_packer pk;
} frpc_mp_buf;

/* NULL p: both are no-ops. */
void frpc_mp_buf_init(frpc_mp_buf *p);
void frpc_mp_buf_destroy(frpc_mp_buf *p);

#ifdef __cplusplus
}
#endif

#endif /* FABRPC_H */
