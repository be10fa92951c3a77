/*
 * Bootstrap key-value store: a small TCP service run by rank 0 (like torch's
 * TCPStore) through which ranks exchange fabric addresses and meet at
 * barriers, and the job's authority on membership and liveness. Keys are
 * strings (1..255 bytes), values are bytes (up to FR_STORE_MAX_VALUE).
 *
 * Wire protocol FR_STORE_PROTO (all integers little-endian), one request
 * then one reply per round trip on a client's connection:
 *   request: u8 op, u16 keylen, u32 vallen, i64 arg, key bytes, value bytes
 *   reply:   i32 status (0 or FRPC_E*), i64 num, u32 vallen, value bytes;
 *            on an error the value, if any, is its message (at most 255
 *            bytes of text), which the client keeps for fr_store_last_error
 *            (and fr_store_connect copies to errbuf).
 *   data ops (key required): SET=1 (store value), GET=2 (wait until the key
 *   exists or arg ms pass, arg <= 0: no limit, then return its value),
 *   ADD=3 (add arg to the key's counter, created at 0; returns the new
 *   value in num), WAIT_GE=4 (wait until the counter key reaches arg; the
 *   value is the timeout as an i64 of ms, <= 0: no limit; num returns the
 *   counter), UNARRIVE=10 (takes 1 from the counter key unless it has
 *   reached arg: a barrier's arrival taken back, but only while the
 *   barrier has not completed; num returns the counter, after).
 *   session ops (no key): HELLO=5, AUTH=6 (below), WATCH=7 (arg = events
 *   the client has seen, value = i64 timeout ms, <= 0: no limit; parks
 *   until the server has more events, then returns those from number
 *   `seen` on, as many as fit in FR_STORE_MAX_VALUE (about 10,000): num =
 *   the number of the event after the last one returned, value = per
 *   event i32 rank, u8 state, u8 reason length, reason),
 *   LEAVE=8 (MAIN only: the rank leaves the job),
 *   GONE=9 (LAUNCHER only, and all it may send: the process started as
 *   the rank its HELLO names has ended; value = the launcher's words,
 *   e.g. "exited with status 3", at most FR_STORE_GONE_MAX bytes of
 *   text; num = 1 when that rank had not joined, and so the job is
 *   poisoned: "rank 2 ended before it joined the job: exited with status
 *   3 (fabrpc-run)"; 0 when it had joined, its MAIN's closing being what
 *   tells the others, or it was already told of).
 *   Pushes: once a WATCH connection has sent a WATCH, the server also
 *   sends it, unasked, a frame with status FR_STORE_PUSHED (1) and a
 *   WATCH's answer (num, value) holding the events from the last one it
 *   was sent on, whenever there are more while it has no WATCH parked and
 *   no reply under way: a client stopped after its WATCH was answered
 *   reads the next events when it resumes, even if the store has closed
 *   since. Such frames are no reply: a client reads them wherever they
 *   come (fr_store_watch returns them; another request keeps them for
 *   the next fr_store_watch, since each holds only events after the
 *   last one sent).
 * A counter is a value holding a decimal integer ("42", as torch's
 * TCPStore keeps them): GET of a counter returns that text, a SET of
 * decimal text may be ADDed to, and ADD or WAIT_GE on any other value
 * answers FRPC_EPROTO. A missing counter counts 0.
 *
 * Joining (HELLO/AUTH). A connection's first request must be HELLO
 * {u32 FR_STORE_PROTO, u32 fabrpc version, i32 rank, i32 world, u8 role,
 * u8 has_key, 32-byte client nonce}; the server answers {u8 has_key,
 * 32-byte server nonce, 32-byte server proof (zeros without a key)}, or
 * FRPC_EPROTO when the HELLO names another FR_STORE_PROTO (only that field
 * is read then); the client checks the proof and
 * sends AUTH {client proof, or nothing when it has no key}; the server
 * answers 0 (a member) or a refusal. A proof is HMAC-SHA256(job key,
 * side label || the HELLO bytes || server nonce): both sides prove they
 * hold the key, nonces are fresh per connection (getrandom), the key never
 * crosses the wire, MACs are compared in constant time. Authentication
 * covers the start of a connection only: nothing is encrypted, and a
 * party on the path can read values and take over a joined connection.
 * A job without a key (key NULL on both sides) admits anyone who can
 * reach the port and speaks the protocol: use it only on a trusted
 * network. A key on one side only is a key mismatch and refused.
 * Until AUTH succeeds the server accepts nothing else (any other op, or a
 * HELLO/AUTH of the wrong size, closes the connection), buffers at most one
 * small request, and closes a connection that has not joined within
 * FR_STORE_AUTH_MS (3 s): a stranger can never read a value or store one.
 * At AUTH the server checks, in this order: the proof (else FRPC_EACCES,
 * "rank 1 could not prove the job key, rank 0 has one (key mismatch)"),
 * world size and fabrpc version equal rank 0's (else FRPC_EBOOTSTRAP,
 * "rank 1 was started with world size 3, rank 0 with 2" / "rank 2 speaks
 * fabrpc protocol 3, rank 0 speaks 2"), rank in 0..world-1 (else
 * FRPC_ENORANK), not stale and not held by another process (below). A
 * refusal closes the connection.
 *
 * Roles. A rank's MAIN connection is the rank itself: its liveness. At most
 * one MAIN per rank, ever. WATCH connections (any number) are for a second
 * thread, typically parked in WATCH. Both may use every data op. A
 * LAUNCHER connection (the process that started the ranks, holding the
 * job key) names in its HELLO a rank whose process it saw end, and may
 * only send GONE: a rank that dies before it joins would otherwise keep
 * every other rank waiting for it until its init timeout. A launcher's
 * world or version mismatch, or a rank out of range, is refused without
 * poisoning the job.
 *
 * Events. When a MAIN connection closes (EOF, reset, keepalive failure)
 * without LEAVE, that rank is DEAD; after LEAVE it has LEFT. A rank changes
 * state once, and each change is an event {rank, state, reason} that WATCH
 * returns. From the first event on, every GET/WAIT_GE that is not
 * satisfied (parked ones at once, later ones when they arrive) answers
 * FRPC_EPEERLOST "rank 3 died: ..." / "rank 3 left the job": a wait that
 * needs a gone rank can never complete. Values a gone rank SET remain
 * readable, and satisfied waits still succeed (a shutdown barrier completes
 * before anyone leaves).
 *
 * Poisoning. Before every rank has joined (a MAIN of each rank
 * authenticated), an authenticated member whose world or version
 * differs, or whose rank is outside 0..world-1 or is held by another
 * (below), poisons the job: the failure text is kept and every
 * unsatisfied GET/WAIT_GE, parked or later, answers FRPC_EBOOTSTRAP with
 * it, so init fails at once on every rank, not only on the odd one.
 * Poison wins over EPEERLOST. Once every rank has joined, such a member
 * is only refused. A key failure is only refused, always (counted:
 * fr_store_server_key_failures): a process without the key cannot be
 * told from a stranger, and a stranger cannot end a job, starting or
 * running.
 *
 * Stale store. A MAIN HELLO for a rank that already died or left, or whose
 * MAIN is still connected while the store's own rank (rank 0) has left,
 * is refused with FRPC_ESHUTDOWN (a WATCH for a gone rank likewise): it
 * is a previous run's store that is still closing. fr_store_connect
 * treats that as "not up yet" and retries until its timeout.
 *
 * Two processes with one rank. A MAIN HELLO for a rank whose MAIN is
 * still connected, to a store whose rank 0 has not left, is a second
 * process started as that rank: refused for good with FRPC_EEXIST ("rank
 * 1 is already held by a live member of this job ..."), and, before
 * every rank has joined, it poisons the job ("rank 1 was claimed twice
 * ..."): the rank the second process was meant to be will never come.
 *
 * The server validates every length before it buffers anything; a
 * malformed request (unknown op, a data op's key of 0 or over
 * FR_STORE_MAX_KEY bytes or holding a NUL, a session op with a key, value
 * over FR_STORE_MAX_VALUE, a value on GET, ADD or LEAVE, a WAIT_GE or WATCH
 * value that is not 8 bytes) closes only that connection. A GET, WAIT_GE or
 * WATCH that is not ready is parked, not polled: the SET/ADD/event that
 * makes it ready answers it, or its deadline does with FRPC_ETIMEDOUT.
 *
 * Never hangs: the client bounds every wait on its socket with poll(). The
 * server enforces GET/WAIT_GE/WATCH deadlines and the client gives up 5 s
 * after them; other replies and all sends are bounded by 60 s (the
 * handshake's by 3 s per round trip). A wait with no limit lasts as long as
 * the connection lives; keepalive on both sides notices a vanished host in
 * about 5 s (see fr_store__tune_socket). A send/receive failure, such a
 * client-side timeout or a malformed reply closes the client's connection:
 * that call and every later one on it return FRPC_EBOOTSTRAP. FRPC_EINVAL
 * is found before anything is sent and leaves the connection usable.
 *
 * Thread safety: a client is used by one thread at a time (the agent holds
 * a lock around it); different clients are independent, so a WATCH client
 * may block on one thread while the MAIN client is used on another. The
 * server runs its own thread; fr_store_server_wait_gone may be called from
 * any thread.
 */
#ifndef FR_COMM_STORE_H
#define FR_COMM_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "serialization/fabrpc_errors.h"

#define FR_STORE_MAX_KEY 255u
#define FR_STORE_MAX_VALUE (1u << 20)

#define FR_STORE_PROTO 4u /* bump when the store wire protocol changes
                            (2: pushed WATCH events; 3: WATCH events in
                            pages from the client's count; 4: UNARRIVE) */
/* The status of a frame the server sends a WATCH connection unasked: the
 * events, as a WATCH's answer (see WATCH above). */
#define FR_STORE_PUSHED 1

typedef enum {
    FR_STORE_ROLE_MAIN = 0,    /* the rank's own connection: its liveness */
    FR_STORE_ROLE_WATCH = 1,   /* a second connection, for liveness events */
    FR_STORE_ROLE_LAUNCHER = 2 /* the job's launcher: GONE only */
} fr_store_role;

typedef struct fr_store_server fr_store_server;
typedef struct fr_store_client fr_store_client;

/* Who connects (or, for the server, the job's truth). Borrowed: the
 * functions that take it copy what they keep. */
typedef struct fr_store_ident {
    int rank, world;    /* who connects, and the world size it believes */
    uint32_t version;   /* fabrpc's protocol version (the envelope's) */
    const uint8_t *key; /* the job secret (borrowed), or NULL */
    size_t key_len;     /* 0 with key NULL: a job without a secret */
    fr_store_role role; /* ignored by the server */
    /* How soon a peer that vanished without closing (host down, network
     * cut) is given up on this side's connections, in ms: keepalive
     * probes and TCP_USER_TIMEOUT (fr_store__tune_socket). 0: 5000;
     * below 4000 is taken as 4000 (keepalive counts whole seconds: 1 s
     * idle, then 3 probes 1 s apart). */
    int liveness_ms;
    /* Rank 0 serves the store and joins it as a client too. Server
     * (fr_store_server_start): own_client true says that this process's
     * own client will join as self's MAIN, so a MAIN for self from any
     * other connection is a second process started as that rank, refused
     * as one even before the own client comes (it used to be admitted,
     * and the true rank 0 refused). Client (fr_store_connect): own_server
     * is that server, told each connection's local end before its HELLO.
     * false / NULL otherwise: no connection is told apart. */
    bool own_client;
    fr_store_server *own_server;
} fr_store_ident;

/* Event states. */
#define FR_STORE_DEAD 1 /* its MAIN connection closed without LEAVE */
#define FR_STORE_LEFT 2 /* it sent LEAVE */

typedef struct fr_store_event {
    int rank;
    int state;        /* FR_STORE_DEAD or FR_STORE_LEFT */
    char reason[96];  /* NUL-terminated, e.g. "its store connection closed
                         without leaving (process died?)" */
} fr_store_event;

/*
 * Starts serving on host:port (host NULL or "" means all IPv4 interfaces,
 * "::" all IPv6 ones; port 0 picks a free port, see fr_store_server_port).
 * self is rank 0's identity: its world, version and key are the job's
 * truth (copied; self->role is ignored). The socket has SO_REUSEADDR, so a
 * restarted job can take the port back at once. Returns 0 and *out, or
 * FRPC_EBOOTSTRAP (bind/listen failed; errbuf, if not NULL, gets "cannot
 * listen on HOST:PORT: strerror"), FRPC_ENOMEM, FRPC_EINVAL (self NULL,
 * world outside 1..2^20, rank outside 0..world-1, key_len without key).
 * Does not block beyond setting up the socket; serving runs on a thread.
 */
int fr_store_server_start(const char *host, uint16_t port,
                          const fr_store_ident *self, fr_store_server **out,
                          char *errbuf, size_t errlen);

/* The port actually bound (0 for NULL). */
uint16_t fr_store_server_port(const fr_store_server *s);

/* fd, a connection to s of this process (fr_store_ident.own_server), is
 * the one that may join as s's own rank: s learns its local end (address
 * and port). Any thread; before the connection's HELLO. */
void fr_store_server_note_own(fr_store_server *s, int fd);

/* How many connections failed the key proof so far (0 for NULL); last,
 * if not NULL, gets the last failure's text ("a process claiming rank 1
 * failed the job key proof: ..."; "" if none). Any thread. */
uint64_t fr_store_server_key_failures(fr_store_server *s, char *last,
                                      size_t n);

/* Stops serving, closes every connection (clients blocked in GET/WAIT/
 * WATCH get FRPC_EBOOTSTRAP), joins the thread and frees s. NULL is a
 * no-op. No other thread may be in fr_store_server_wait_gone or
 * fr_store_server_wait_told. */
void fr_store_server_stop(fr_store_server *s);

/* Waits until every other rank's MAIN connection is gone (it left or
 * died; a rank that never joined counts as gone), at most timeout_ms
 * (<= 0: just checks). 0 or FRPC_ETIMEDOUT. For rank 0 at shutdown; any
 * thread, safe against the server thread. Blocks. */
int fr_store_server_wait_gone(fr_store_server *s, int timeout_ms);

/* As fr_store_server_wait_gone, and, once the job was poisoned while it
 * joined (it cannot start), also until every rank but one (the one the
 * poison says never comes) has joined, and so been told: for rank 0
 * whose init failed, so that a rank started a little later learns why
 * rather than finding no store until its init timeout. */
int fr_store_server_wait_told(fr_store_server *s, int timeout_ms);

/*
 * Connects to host:port (a name, an IPv4 or a bare IPv6 address) and joins
 * as me (HELLO/AUTH; me is borrowed for the call), retrying with
 * exponential backoff (10 ms doubling to 500 ms) until timeout_ms has
 * passed; timeout_ms <= 0 makes a single attempt (bounded by 1 s). Name
 * lookup failures, connections lost during the handshake and stale-store
 * refusals (FRPC_ESHUTDOWN) are retried too. Returns 0 and
 * *out, or, with a message in errbuf:
 *   FRPC_EBOOTSTRAP "cannot reach bootstrap store at HOST:PORT after N ms:
 *     strerror", or "bootstrap store at HOST:PORT still refused rank R
 *     after N ms: <the server's reason>" (a stale store), or the server's
 *     refusal (world or version mismatch: the job is poisoned);
 *   FRPC_EACCES, a key mismatch (either side's proof failed, or only one
 *     side has a key; the client never trusts a store that cannot prove
 *     the key);
 *   FRPC_EEXIST, the rank's MAIN is held by another live process (two
 *     processes were started as one rank): "bootstrap store at HOST:PORT
 *     refused rank R: rank R is already held by a live member ...";
 *   FRPC_ENORANK, FRPC_EPROTO (another store protocol), FRPC_EINVAL,
 *   FRPC_ENOMEM.
 * Blocks.
 */
int fr_store_connect(const char *host, uint16_t port, int timeout_ms,
                     const fr_store_ident *me, fr_store_client **out,
                     char *errbuf, size_t errlen);

/* How a fr_store_connect_how attempt ended, beside its code: what a
 * caller that must tell "no store there" from "a store said no" reads,
 * rather than the message's words. */
typedef enum fr_store_outcome {
    FR_STORE_JOINED,    /* 0 was returned */
    FR_STORE_UNREACHED, /* nothing answered by the deadline ("cannot
                           reach"), or only with a broken handshake */
    FR_STORE_STALE,     /* a store of another run kept refusing ("still
                           refused"): not this job's */
    FR_STORE_REFUSED,   /* a store of a job answered and refused this
                           rank for good (key, rank held, world, version):
                           its own words in errbuf */
    FR_STORE_FOREIGN    /* something other than a store answered
                           (FRPC_EPROTO), or the arguments were bad */
} fr_store_outcome;

/* fr_store_connect, also saying how it ended in *how (when not NULL). */
int fr_store_connect_how(const char *host, uint16_t port, int timeout_ms,
                         const fr_store_ident *me, fr_store_client **out,
                         char *errbuf, size_t errlen, fr_store_outcome *how);

/* The longest text a GONE may carry. */
#define FR_STORE_GONE_MAX 160

/*
 * Tells the store at host:port, as the job's launcher, that the process
 * started as rank launcher->rank has ended, why: the launcher's words
 * (borrowed; cut to FR_STORE_GONE_MAX bytes). launcher holds the job's
 * world, version and key (borrowed); its role is ignored. When that rank
 * had not joined, the job is poisoned: every rank's bootstrap fails at
 * once naming it, instead of at its init timeout; *poisoned (may be
 * NULL) is then 1, else 0. Errors: fr_store_connect's (it retries until
 * timeout_ms while the store is not up yet), and FRPC_EINVAL for a NULL
 * why. Blocks up to timeout_ms and a round trip.
 */
int fr_store_report_gone(const char *host, uint16_t port, int timeout_ms,
                         const fr_store_ident *launcher, const char *why,
                         int *poisoned, char *errbuf, size_t errlen);

/* Closes and frees c (without LEAVE: for a MAIN connection the server then
 * records the rank as DEAD). NULL is a no-op. */
void fr_store_close(fr_store_client *c);

/* Ends c's connection from another thread: a call blocked on it (a WATCH)
 * returns FRPC_EBOOTSTRAP at once, and so does every later one. For a
 * MAIN connection the server then sees a death unless the rank left.
 * Safe while another thread is inside a call on c; c must still be
 * closed with fr_store_close. NULL is a no-op. */
void fr_store_interrupt(fr_store_client *c);

/* The message of c's last failed call ("" if none failed): the server's
 * text for FRPC_EBOOTSTRAP/FRPC_EPEERLOST answers, else a short local
 * description. Owned by c, valid until its next call. */
const char *fr_store_last_error(const fr_store_client *c);

/* Whether why, a FRPC_EPEERLOST answer's text, says that the first rank
 * gone left (LEAVE) rather than died. */
int fr_store_lost_by_leave(const char *why);

/* Sets key to len bytes of value (copied; overwrites; value may be NULL
 * when len is 0). Errors: FRPC_EINVAL (bad key or len), FRPC_EBOOTSTRAP
 * (connection lost), FRPC_ENOMEM (the server is out of memory). */
int fr_store_set(fr_store_client *c, const char *key, const void *value,
                 size_t len);

/* Waits until key exists (at most timeout_ms; <= 0 means no limit) and
 * returns a malloc'ed copy of its value in *value (caller frees; a zero-
 * length value gives a non-NULL 1-byte allocation) and its length.
 * Errors: FRPC_ETIMEDOUT, FRPC_EINVAL, FRPC_EBOOTSTRAP (connection lost, or
 * the job is poisoned: see fr_store_last_error), FRPC_EPEERLOST (a rank
 * died or left before the key appeared), FRPC_ENOMEM. */
int fr_store_get(fr_store_client *c, const char *key, int timeout_ms,
                 void **value, size_t *len);

/* Atomically adds delta to the counter named key (created at 0) and
 * returns the new value in *result (may be NULL). Errors: FRPC_EINVAL
 * (also: the sum would overflow an i64), FRPC_EBOOTSTRAP, FRPC_EPROTO (key
 * holds a non-counter value). */
int fr_store_add(fr_store_client *c, const char *key, int64_t delta,
                 int64_t *result);

/* Waits until the counter key is >= target, at most timeout_ms (<= 0: no
 * limit). Errors: FRPC_ETIMEDOUT, FRPC_EINVAL, FRPC_EBOOTSTRAP, FRPC_EPROTO
 * (key holds a non-counter value), and as fr_store_get FRPC_EPEERLOST and
 * the poisoned FRPC_EBOOTSTRAP. */
int fr_store_wait_ge(fr_store_client *c, const char *key, int64_t target,
                     int timeout_ms);

/*
 * Adds 1 to the counter key and waits until it reaches target, at most
 * timeout_ms (<= 0: no limit): the ADD and the WAIT_GE go in one write, so
 * the store serves them back to back (a connection's requests in order)
 * and no other rank's ADD comes between. A barrier's last rank may be
 * rank 0, which may exit as soon as it is released (no frpc_shutdown):
 * with an ADD, then a WAIT_GE a round trip later, an earlier rank's wait
 * could reach a store already gone. *added (may be NULL) is 1 once the
 * ADD was sent: the store counts it, even if the call then fails; on
 * FRPC_ETIMEDOUT with *added 1 wait again with fr_store_wait_ge, with
 * *added 0 (older replies were still owed: a stopped store) arrive again.
 * Errors as fr_store_add and fr_store_wait_ge.
 */
int fr_store_arrive(fr_store_client *c, const char *key, int64_t target,
                    int timeout_ms, int *added);

/*
 * Takes 1 from the counter key unless it is >= target, in one step at the
 * store, and returns the counter after in *result (may be NULL): a
 * barrier's arrival taken back when it timed out, unless the barrier
 * completed meanwhile (*result >= target). Two ranks taking back at once
 * after the last arrival each see it completed (an ADD of -1 and a check
 * let the second see target - 2). Errors as fr_store_add.
 */
int fr_store_unarrive(fr_store_client *c, const char *key, int64_t target,
                      int64_t *result);

/*
 * Barrier for world ranks: adds 1 to the counter key, then waits until it
 * reaches world (fr_store_arrive). The key must be fresh for each barrier
 * (the agent adds a generation number). Errors as fr_store_wait_ge.
 */
int fr_store_barrier(fr_store_client *c, const char *key, int world,
                     int timeout_ms);

/*
 * Waits until the server has more than seen events (at most timeout_ms;
 * <= 0: no limit), then copies new ones into ev, at most cap (ev may be
 * NULL when cap is 0): ev[i] is event number seen + i (events are never
 * reordered). *n_out gets the number copied, and *total seen + *n_out,
 * the seen for the next call, or with cap 0 the number of the event
 * after the last of the answer's page (either may be NULL). A call may
 * return fewer events than there are (the store sends about 10,000 at a
 * time): call again with the new seen; so with cap 0 and more than that
 * many new events, *total is less than the store's count. Events the
 * server pushed since the last call (see "Pushes" above) are read first,
 * with no request sent, so a caller that was stopped gets the events that
 * came meanwhile even when the store is gone by then. Errors:
 * FRPC_ETIMEDOUT (nothing new), FRPC_EINVAL, FRPC_EBOOTSTRAP (the
 * connection to the store is lost, e.g. rank 0 died: returned promptly),
 * FRPC_ENOMEM. Blocks; meant for a WATCH client on its own thread.
 */
int fr_store_watch(fr_store_client *c, uint64_t seen, int timeout_ms,
                   fr_store_event *ev, size_t cap, size_t *n_out,
                   uint64_t *total);

/* Records that this MAIN connection's rank leaves the job (an event LEFT;
 * later waits that need it fail with FRPC_EPEERLOST), then the caller may
 * close c. Errors: FRPC_EINVAL (not a MAIN connection), FRPC_EBOOTSTRAP. */
int fr_store_leave(fr_store_client *c);

/* 1 if the last operation's request went out whole (so the store, which
 * serves a connection's requests in order, applies it unless it dies),
 * even when that operation then failed by its bound: a stopped store
 * applies a late ADD once it resumes. 0 otherwise, and for a NULL c. */
int fr_store_last_sent(const fr_store_client *c);

/* Bounds every later operation on c by deadline_ms (monotonic ms, the
 * clock of fr_now_ns; 0: no bound beyond each operation's own): past it
 * the operation ends FRPC_ETIMEDOUT and, when only its reply was still to
 * come, c stays usable (the late reply is read and dropped before the
 * next one). For callers whose waits have their own bound (a barrier's
 * timeout, shutdown's, frpc_init's) while rank 0 may be stopped. */
int64_t fr_store_cap(fr_store_client *c, int64_t deadline_ms); /* the previous bound */

#endif /* FR_COMM_STORE_H */
