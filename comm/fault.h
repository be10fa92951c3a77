/*
 * Fault injection for tests: a site named here fails its next n passes
 * once a test arms it (fr_fault_arm). The sites are error paths that a
 * healthy provider never takes, so without this they would go untested.
 * fr_fault_arm is internal (libfabrpc exports frpc_ symbols only): only
 * tests linked with the layers' internals can arm a site. Unarmed, a site
 * costs one relaxed atomic load, on paths that are not per call.
 */
#ifndef FR_COMM_FAULT_H
#define FR_COMM_FAULT_H

#include <stdatomic.h>

typedef enum fr_fault_site {
    FR_FAULT_RECV_POST,     /* fi_recv / fi_recvv fails (fabric.c) */
    FR_FAULT_CQ_NO_CONTEXT, /* an empty CQ read gives an error entry
                               without a context instead */
    FR_FAULT_SEND_POST,     /* fi_send / fi_inject fails with a plain
                               provider error (-FI_EOTHER) */
    FR_FAULT_RMA_PROBE,     /* the test registration of fr_fabric_rma_
                               usable fails, as on a provider whose RMA
                               does not work (rma.c) */
    FR_FAULT_CQ_NO_SOURCE,  /* a completion read with its source names
                               none (FI_ADDR_NOTAVAIL), as sockets does
                               for some messages a rank sends itself
                               (fabric.c, where sources are checked) */
    FR_FAULT_INIT_THREADS,  /* frpc_init cannot make the liveness
                               threads (pthread_create fails) */
    FR_FAULT_CONNECT_DIES,  /* the process ends (_exit(9)) as it starts
                               fr_fabric_connect_peers: a rank killed
                               while the ranks connect (fabric.c) */
    FR_FAULT_WATCH_REFUSED, /* a try to open the liveness watch's store
                               connection is refused, as when the store
                               (rank 0) is gone (liveness.c) */
    FR_FAULT_SHUTDOWN_DIES, /* the process ends (_exit(9)) as its
                               frpc_shutdown leaves the store, after its
                               last barrier: a rank killed inside its
                               shutdown (agent.c) */
    FR_FAULT_ADDR_STOPS,    /* the process stops itself (SIGSTOP) as it
                               would publish its endpoint address: a rank
                               that joined the job and then went no
                               further (agent.c) */
    FR_FAULT_READ_EIO,      /* a rendezvous read completes with -FI_EIO,
                               as sockets reports one from a sender killed
                               meanwhile (rndv.c) */
    FR_FAULT_CONNECT_SENT_DIES, /* the process ends (exit(9), its exit
                               handlers removing its shm region's name)
                               when a first send to a peer must be tried
                               again (on shm: once it left its connection
                               request with the peer), as a rank killed
                               in its first sends (fabric.c) */
    FR_FAULT_ADDR_LATE,     /* the rank sleeps FR_FAULT_LATE_MS after it
                               published its endpoint address, before it
                               reads the others': a rank slow to map its
                               peers (agent.c) */
    FR_FAULT_JOINED_DIES,   /* the process ends (exit(9), its exit
                               handlers removing its doorbell's name) as
                               frpc_init's first barrier passes (agent.c) */
    FR_FAULT_BELLS_LATE,    /* the rank sleeps FR_FAULT_LATE_MS before it
                               maps the others' doorbells (agent.c) */
    FR_FAULT_LOCK_DIES,     /* on shm, as the ranks start to connect,
                               the process takes the next rank's region
                               lock, as a sender does, and ends
                               (_exit(9): its names stay, as a SIGKILL
                               leaves them) before it lets it go
                               (agent.c) */
    FR_FAULT_SHUT_LATE,     /* the rank sleeps FR_FAULT_LATE_MS in its
                               shutdown once its liveness thread has
                               stopped, before its last polls (agent.c) */
    FR_FAULT_TAKE_NOMEM,    /* frpc_request_take_args finds no memory
                               for the copy of short args (request.c) */
    FR_FAULT_NOTIFY_NOMEM,  /* a rank finds no memory to queue a
                               notification (notify.c) */
    FR_FAULT_SHM_NAME_KEPT, /* frpc_init leaves this rank's shm region
                               its name (agent.c): a stranger process
                               can then reach the rank over shm, to be
                               refused (tests/integration/stranger.c) */
    FR_FAULT_HOLD_KEPT,     /* a transfer keeps its hold on its remote
                               region's listing (rma.c): as a peer
                               stalled before its provider gave the
                               transfer back */
    FR_FAULT_ANSWERS_CLOSED_LATE, /* the rank waits in its shutdown,
                               once answers to kept requests are closed
                               and before the transport closes, until
                               no kept request is left (at most 10 s;
                               agent.c) */
    FR_FAULT_SITES
} fr_fault_site;

#define FR_FAULT_LATE_MS 500

extern atomic_int fr__fault_left[FR_FAULT_SITES];

/* 1 if site should fail this pass (and counts the pass), else 0. */
static inline int fr_fault_hit(fr_fault_site site)
{
    if (atomic_load_explicit(&fr__fault_left[site], memory_order_relaxed) <= 0)
        return 0;
    return atomic_fetch_sub(&fr__fault_left[site], 1) > 0;
}

/* Makes site fail its next n passes (0 disarms it). Any thread. */
void fr_fault_arm(fr_fault_site site, int n);

#endif /* FR_COMM_FAULT_H */
