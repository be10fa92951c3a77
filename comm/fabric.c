/*
 * Endpoint set-up, the eager send path and CQ progress. See fabric.h for
 * the design notes; the invariant kept here is that every posted operation
 * has an fr_op context and every completion, good or bad, is routed by it.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "comm/clock.h"
#include "comm/exit_unlink.h"
#include "comm/fabric_internal.h"
#include "comm/fault.h"
#include "comm/threads.h"
#include "comm/tsan.h"

#define FR_MAX_SEND_SLOTS 256
#define FR_BATCH_MAX (16u << 10) /* bytes coalesced into one message */

static void set_err(char *errbuf, size_t errlen, const char *what, int ret)
{
    if (errbuf && errlen)
        snprintf(errbuf, errlen, "%s failed: %s (%d)", what,
                 fi_strerror(ret < 0 ? -ret : ret), ret);
}

/*
 * shm (libfabric 1.17) copies a message over its inject size by CMA
 * (process_vm_readv) in a loop that runs until the sender's whole length
 * is copied: into a shorter receive buffer it copies 0 bytes, forever,
 * inside fi_cq_read (smr_cma_loop). One message larger than a receive
 * buffer from anyone who can map our region stopped this rank. So on shm
 * every receive buffer is followed in its iov by a sink: FR_SINK_BYTES of
 * address space that is reserved, not committed, given FR_SINK_IOVS
 * times (the entries may alias), where such a message lands whole and is
 * then dropped as oversize (handle_now), the sink's pages given back. A
 * message larger than the buffer and all the sink entries would still
 * spin in libfabric; shm only serves processes of the same user.
 */
#define FR_SINK_BYTES ((size_t)256 << 20)
#define FR_SINK_IOVS 3

/* 0, or FRPC_ETRANSPORT with the provider's code in f->recv_fi_err. */
static int post_recv(fr_fabric *f, fr_recv_buf *r)
{
    for (;;) {
        ssize_t ret;
        if (fr_fault_hit(FR_FAULT_RECV_POST)) {
            ret = -FI_EOTHER;
        } else if (f->sink) {
            struct iovec iov[1 + FR_SINK_IOVS];
            iov[0].iov_base = r->buf;
            iov[0].iov_len = f->opts.eager_max + 1;
            for (unsigned i = 1; i <= f->sink_iovs; i++) {
                iov[i].iov_base = f->sink;
                iov[i].iov_len = FR_SINK_BYTES;
            }
            ret = fi_recvv(f->ep, iov, NULL, 1 + f->sink_iovs,
                           FI_ADDR_UNSPEC, &r->op.fictx);
        } else {
            ret = fi_recv(f->ep, r->buf, f->opts.eager_max + 1, NULL,
                          FI_ADDR_UNSPEC, &r->op.fictx);
        }
        if (ret == 0)
            return 0;
        if (ret != -FI_EAGAIN) {
            f->recv_fi_err = (int)ret;
            return FRPC_ETRANSPORT;
        }
        /* The receive queue is momentarily full: let the provider drain. */
        fi_cq_read(f->cq, NULL, 0);
    }
}

/* Gives r back to the provider after use; if it refuses, r waits on the
 * unposted list for the next poll (poll owner only). Every refusal is
 * counted, first offers and later ones alike, so the count does not
 * depend on how many polls fell between them. */
static void repost(fr_fabric *f, fr_recv_buf *r)
{
    if (post_recv(f, r) == 0)
        return;
    atomic_fetch_add(&f->st.recv_repost_failed, 1);
    atomic_fetch_add(&f->st.recv_unposted, 1);
    r->next_unposted = f->unposted;
    f->unposted = r;
}

static void repost_unposted(fr_fabric *f)
{
    fr_recv_buf **p = &f->unposted;
    while (*p) {
        fr_recv_buf *r = *p;
        if (post_recv(f, r) == 0) {
            *p = r->next_unposted;
            atomic_fetch_sub(&f->st.recv_unposted, 1);
        } else {
            atomic_fetch_add(&f->st.recv_repost_failed, 1);
            p = &r->next_unposted;
        }
    }
}

static int open_cq(fr_fabric *f, char *errbuf, size_t errlen)
{
    struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_MSG,
                              .size = 0,
                              .wait_obj = FI_WAIT_FD};
    int ret = f->opts.never_sleeps ? -FI_ENOSYS
                                   : fi_cq_open(f->domain, &attr, &f->cq,
                                                NULL);
    if (ret == 0) {
        if (fi_control(&f->cq->fid, FI_GETWAIT, &f->wait_fd) != 0)
            f->wait_fd = -1;
        if (f->wait_fd >= 0)
            return 0;
        fi_close(&f->cq->fid);
    }
    /* No fd wait object (shm; udp, whose rxd takes FI_WAIT_FD but will
     * not show the fd): poll, and sleep by back-off instead. Keeping
     * rxd's CQ for fi_cq_sread was tried: udp's blocking round trip went
     * from 172 to 40 us, but with a wait object rxd delivered 16 MiB
     * replies with wrong bytes (itest calls, 4 ranks under TSan: 3 runs
     * of 8 against 0 of 10 without). */
    attr.wait_obj = FI_WAIT_NONE;
    f->wait_fd = -1;
    ret = fi_cq_open(f->domain, &attr, &f->cq, NULL);
    if (ret) {
        set_err(errbuf, errlen, "fi_cq_open", ret);
        return FRPC_ETRANSPORT;
    }
    return 0;
}

static int open_endpoint(fr_fabric *f, char *errbuf, size_t errlen)
{
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    int ret;

    if ((ret = fi_fabric(f->info->fabric_attr, &f->fabric, NULL))) {
        set_err(errbuf, errlen, "fi_fabric", ret);
        return FRPC_ETRANSPORT;
    }
    if ((ret = fi_domain(f->fabric, f->info, &f->domain, NULL))) {
        set_err(errbuf, errlen, "fi_domain", ret);
        return FRPC_ETRANSPORT;
    }
    if ((ret = open_cq(f, errbuf, errlen)))
        return ret;
    if ((ret = fi_av_open(f->domain, &av_attr, &f->av, NULL))) {
        set_err(errbuf, errlen, "fi_av_open", ret);
        return FRPC_ETRANSPORT;
    }
    if ((ret = fi_endpoint(f->domain, f->info, &f->ep, NULL))) {
        set_err(errbuf, errlen, "fi_endpoint", ret);
        return FRPC_ETRANSPORT;
    }
    /* Bound before anything else can fail: rxm's close of an endpoint
     * without its CQ and AV dereferences them (a segfault when tcp
     * refused fi_setname). */
    if ((ret = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV)) ||
        (ret = fi_ep_bind(f->ep, &f->av->fid, 0))) {
        set_err(errbuf, errlen, "fi_ep_bind", ret);
        return FRPC_ETRANSPORT;
    }
    if (f->opts.ep_name &&
        (ret = fi_setname(&f->ep->fid, (void *)f->opts.ep_name,
                          strlen(f->opts.ep_name) + 1))) {
        set_err(errbuf, errlen, "fi_setname", ret);
        return FRPC_ETRANSPORT;
    }
    if ((ret = fi_enable(f->ep))) {
        set_err(errbuf, errlen, "fi_enable", ret);
        return FRPC_ETRANSPORT;
    }
    /* shm made its region under that name: not to be left at exit. */
    if (f->opts.ep_name)
        f->exit_name = fr_exit_unlink_add(f->opts.ep_name);
    return 0;
}

int fr_fabric_open(const struct fi_info *info, const fr_fabric_opts *opts,
                   fr_fabric **out, char *errbuf, size_t errlen)
{
    fr_fabric *f;
    int ret;

    if (!info || !opts || !out || opts->eager_max <= FR_ENV_HDR_SIZE ||
        opts->recv_count == 0 || !opts->cb.on_msg)
        return FRPC_EINVAL;
    f = calloc(1, sizeof(*f));
    if (!f)
        return FRPC_ENOMEM;
    f->wait_fd = -1;
    f->opts = *opts;
    pthread_mutex_init(&f->slot_lock, NULL);
    pthread_mutex_init(&f->poll_lock, NULL);
    fr_spin_init(&f->rndv_lock);
    pthread_mutex_init(&f->batch_lock, NULL);
    fr_spin_init(&f->led_lock);
    fr__block_cache_init(&f->out_cache, FI_REMOTE_READ);
    fr__block_cache_init(&f->in_cache, 0);
    atomic_init(&f->poll_owned, 0);
    f->held_tail = &f->held_head;
    atomic_init(&f->next_key, 1);
    atomic_init(&f->next_split, 1); /* a part's req_id: never 0 */
    atomic_init(&f->split_senders, 0);
    f->next_cookie = 1;
    f->max_slots = FR_MAX_SEND_SLOTS;
    f->info = fi_dupinfo(info);
    if (!f->info) {
        ret = FRPC_ENOMEM;
        goto fail;
    }
    f->inject_max = f->info->tx_attr->inject_size;
    if (f->inject_max > 4096)
        f->inject_max = 4096; /* inject frames are built on the stack */
    if (f->info->fabric_attr->prov_name &&
        strstr(f->info->fabric_attr->prov_name, "ofi_rxm") &&
        f->opts.eager_max > FR_RXM_EAGER_MAX) {
        /* Frames rxm sends in one piece (see FR_RXM_EAGER_MAX); longer
         * ones go by our rendezvous. */
        f->opts.eager_max = FR_RXM_EAGER_MAX;
    }
    if (f->info->fabric_attr->prov_name &&
        strstr(f->info->fabric_attr->prov_name, "ofi_rxd")) {
        /* See tx_cap (fabric_internal.h): rxd has min(1024, tx size)
         * entries; a quarter stays free for its own retransmissions. */
        size_t n = f->info->tx_attr->size ? f->info->tx_attr->size : 64;
        n = n < 1024 ? n : 1024;
        f->tx_cap = (unsigned)(n * 3 / 4 ? n * 3 / 4 : 1);
        f->inject_max = 0;
    }
    if (f->info->fabric_attr->prov_name &&
        strcmp(f->info->fabric_attr->prov_name, "sockets") == 0 &&
        f->info->rx_attr->total_buffered_recv == 0) {
        /* sockets buffers messages that find no posted receive up to this
         * many bytes, and reports 0: a peer that stopped polling for 3 s
         * while another pushed 20,000 calls then lost one in about 1 run
         * of 12 ("Exceeded buffered recv limit"). Its maximum. */
        f->info->rx_attr->total_buffered_recv = 64u << 20;
    }
    if (f->info->fabric_attr->prov_name &&
        strcmp(f->info->fabric_attr->prov_name, "shm") == 0 &&
        f->inject_max > FR_ENV_HDR_SIZE) {
        size_t cap = FR_PARTS_MAX * (f->inject_max - FR_ENV_HDR_SIZE);
        f->split_max = opts->split_max < cap ? opts->split_max : cap;
        if (f->split_max > opts->eager_max)
            f->split_max = opts->eager_max;
        f->parts_in = 1;
    }
    /* See rma_write_flags and rma_by_initiator (fabric_internal.h). */
    f->rma_by_initiator =
        f->info->fabric_attr->prov_name &&
        strcmp(f->info->fabric_attr->prov_name, "shm") == 0 &&
        (f->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) &&
        !(f->info->tx_attr->msg_order &
          (FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_RAS | FI_ORDER_WAR |
           FI_ORDER_WAW | FI_ORDER_WAS | FI_ORDER_SAR | FI_ORDER_SAW));
    f->rma_write_flags = f->rma_by_initiator ? 0 : FI_DELIVERY_COMPLETE;
    f->slotless = f->parts_in && f->rma_by_initiator;
    f->rma_chunk = 4u << 20;
    if (f->info->ep_attr->max_msg_size &&
        f->info->ep_attr->max_msg_size < f->rma_chunk)
        f->rma_chunk = f->info->ep_attr->max_msg_size;
    f->mr_virt_addr = !!(f->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR);
    f->mr_prov_key = !!(f->info->domain_attr->mr_mode & FI_MR_PROV_KEY);
    f->mr_local = !!(f->info->domain_attr->mr_mode & FI_MR_LOCAL);
    /* Every provider fabrpc runs on here offers it (providers.c asks
     * tcp;ofi_rxm for it); one that does not leaves the token as the
     * only check. */
    f->check_src = !!(f->info->caps & FI_SOURCE);
    f->slots_cap = f->max_slots;
    f->all_slots = calloc(f->slots_cap, sizeof(*f->all_slots));
    f->recv = calloc(opts->recv_count, sizeof(*f->recv));
    if (!f->all_slots || !f->recv) {
        ret = FRPC_ENOMEM;
        goto fail;
    }
    if ((ret = open_endpoint(f, errbuf, errlen)))
        goto fail;
    if (f->info->fabric_attr->prov_name &&
        strcmp(f->info->fabric_attr->prov_name, "shm") == 0 &&
        f->info->rx_attr->iov_limit >= 2) {
        void *m = mmap(NULL, FR_SINK_BYTES, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m != MAP_FAILED) {
            f->sink = m;
            f->sink_iovs = f->info->rx_attr->iov_limit - 1 < FR_SINK_IOVS
                               ? (unsigned)f->info->rx_attr->iov_limit - 1
                               : FR_SINK_IOVS;
        }
    }
    for (unsigned i = 0; i < opts->recv_count; i++) {
        fr_recv_buf *r = &f->recv[i];
        r->op.type = FR_OP_RECV;
        r->buf = malloc(f->opts.eager_max + 1); /* + 1: see handle_now */
        if (!r->buf) {
            ret = FRPC_ENOMEM;
            goto fail;
        }
        if ((ret = post_recv(f, r))) {
            set_err(errbuf, errlen, "fi_recv", f->recv_fi_err);
            goto fail;
        }
    }
    *out = f;
    return 0;
fail:
    fr_fabric_close(f);
    return ret;
}

int fr_fabric_getname(fr_fabric *f, void *addr, size_t *len)
{
    if (!f || !addr || !len)
        return FRPC_EINVAL;
    int ret = fi_getname(&f->ep->fid, addr, len);
    if (ret == -FI_ETOOSMALL)
        return FRPC_EINVAL;
    return ret ? FRPC_ETRANSPORT : 0;
}

int fr_fabric_set_identity(fr_fabric *f, uint32_t rank, uint32_t world,
                           uint64_t token)
{
    if (!f || world == 0 || rank >= world || f->peer)
        return FRPC_EINVAL;
    f->peer = malloc(sizeof(*f->peer) * world);
    f->lost = calloc(world, sizeof(*f->lost));
    f->unreach = calloc(world, sizeof(*f->unreach));
    f->dropped = calloc(world, 1);
    f->rma_ops_to = calloc(world, sizeof(*f->rma_ops_to));
    if (!f->peer || !f->lost || !f->unreach || !f->dropped || !f->rma_ops_to)
        return FRPC_ENOMEM;
    for (uint32_t i = 0; i < world; i++)
        f->peer[i] = FI_ADDR_NOTAVAIL;
    f->rank = rank;
    f->world = world;
    f->token = token;
    if (getrandom(&f->self_token, sizeof(f->self_token), 0) !=
        (ssize_t)sizeof(f->self_token))
        f->self_token = fr_now_ns() ^ ((uint64_t)getpid() << 32) ^ ~token;
    if (fr__batch_init(f))
        return FRPC_ENOMEM;
    /* Wholes are frames, so no longer than eager_max. */
    if (f->parts_in && !(f->parts = fr_parts_new(world, f->opts.eager_max,
                                                 FR_ENV_HDR_SIZE)))
        return FRPC_ENOMEM;
    if (f->opts.coalesce) {
        size_t cap = FR_BATCH_MAX;
        const char *prov = f->info->fabric_attr->prov_name;
        /* shm copies messages up to its inject size through its own
         * queue and moves larger ones another, slower way. */
        if (prov && strstr(prov, "shm") && f->inject_max >= FR_ENV_HDR_SIZE)
            cap = f->inject_max;
        f->batch_cap = f->opts.eager_max < cap ? f->opts.eager_max : cap;
    }
    return 0;
}

int fr_fabric_set_peer(fr_fabric *f, uint32_t rank, const void *addr,
                       size_t len)
{
    fi_addr_t fa = FI_ADDR_NOTAVAIL;
    if (!f || !f->peer || rank >= f->world || !addr || !len)
        return FRPC_EINVAL;
    if (fi_av_insert(f->av, addr, 1, &fa, 0, NULL) != 1)
        return FRPC_ETRANSPORT;
    f->peer[rank] = fa;
    return 0;
}

int fr_fabric_can_block(const fr_fabric *f)
{
    return f->wait_fd >= 0 || f->bell != NULL;
}

void fr_fabric_set_doorbell(fr_fabric *f, fr_doorbell *bell) { f->bell = bell; }

void fr_fabric_unlink_name(fr_fabric *f)
{
    fr_exit_unlink_now(f->exit_name);
    f->exit_name = NULL;
}

int fr_fabric_transfers_active(fr_fabric *f)
{
    return atomic_load(&f->transfers) > 0;
}

/* ---- sending ------------------------------------------------------- */

/* all_slots has room for one more (slot_lock held): it grows past
 * max_slots by the orphans only. */
static int room_for_slot(fr_fabric *f)
{
    if (f->nslots < f->slots_cap)
        return 1;
    fr_send_slot **n = realloc(f->all_slots,
                               2 * (size_t)f->slots_cap * sizeof(*n));
    if (!n)
        return 0;
    f->all_slots = n;
    f->slots_cap *= 2;
    return 1;
}

/* Settles a slot whose posted_to was swapped to 0 from was: gives back
 * its transmit entry, unless fr_fabric_peer_lost did when it made it an
 * orphan, which then counts one orphan fewer. Returns was. */
static unsigned settle_slot(fr_fabric *f, unsigned was)
{
    if (was == FR_SLOT_ORPHAN) {
        pthread_mutex_lock(&f->slot_lock);
        f->slots_orphaned--;
        pthread_mutex_unlock(&f->slot_lock);
    } else if (was) {
        fr__tx_give(f);
    }
    return was;
}

/* Makes sl an orphan if it is still posted to rank (slot_lock held). A
 * connect frame's outcome is settled now (its peer is lost): its late
 * completion, if any, only frees the slot, and fr_fabric_connect_peers
 * must not wait for it. */
static void orphan_locked(fr_fabric *f, fr_send_slot *sl, uint32_t rank)
{
    unsigned to = rank + 1;
    if (!atomic_compare_exchange_strong(&sl->posted_to, &to, FR_SLOT_ORPHAN))
        return;
    f->slots_orphaned++;
    fr__tx_give(f);
    if (sl->ctl) {
        int none = 0;
        atomic_compare_exchange_strong(&f->ctl_err, &none, FRPC_EPEERLOST);
        atomic_fetch_sub(&f->ctl_pending, 1);
    }
}

fr_send_slot *fr__get_slot(fr_fabric *f)
{
    fr_send_slot *s = NULL;
    pthread_mutex_lock(&f->slot_lock);
    if (f->free_slots) {
        s = f->free_slots;
        f->free_slots = s->next_free;
    } else if (f->nslots - f->slots_orphaned < f->max_slots &&
               room_for_slot(f)) {
        s = calloc(1, sizeof(*s));
        if (s && !(s->buf = malloc(f->opts.eager_max))) {
            free(s);
            s = NULL;
        }
        if (s) {
            s->op.type = FR_OP_SEND;
            f->all_slots[f->nslots++] = s;
        }
    }
    pthread_mutex_unlock(&f->slot_lock);
    return s;
}

void fr__put_slot(fr_fabric *f, fr_send_slot *s)
{
    pthread_mutex_lock(&f->slot_lock);
    s->next_free = f->free_slots;
    f->free_slots = s;
    pthread_mutex_unlock(&f->slot_lock);
}

static int read_cq(fr_fabric *f);
static int poll_for_room(fr_fabric *f);

int fr__backoff(fr_fabric *f, uint32_t dst, uint64_t deadline_ns)
{
    if (dst < f->world && fr__unsendable(f, dst))
        return FRPC_EPEERLOST;
    if (atomic_load_explicit(&f->waits_ended, memory_order_relaxed))
        return FRPC_ESHUTDOWN;
    if (fr_now_ns() >= deadline_ns)
        return FRPC_ETIMEDOUT;
    if (fr_fabric_polling_here(f)) {
        /* We send from inside our own poll (a handler's answer, a flush).
         * Reading the CQ frees room, but a handler run from here would
         * send and could wait here again: one level deeper on this stack
         * for each message that arrives while the peer holds us back (64
         * levels seen). So what arrives is held (hold) for our poll to
         * handle. */
        f->holding++;
        int n = read_cq(f);
        f->holding--;
        if (n <= 0)
            sched_yield();
    } else if (poll_for_room(f) <= 0) {
        /* Not fr_fabric_progress: its poll runs handlers on this stack,
         * above a send not posted yet (a whole batch of other threads'
         * frames, perhaps). An inline handler there that waits for a
         * call held the send back until its own timeout: a request or
         * answer in that send was what the wait needed, on this rank or
         * the peer (the stress tool over tcp with small send queues,
         * FI_OFI_RXM_TX_SIZE=4: 8 s with no call ending on either rank,
         * then nested calls timed out). */
        sched_yield();
    }
    return 0;
}

static int acquire_slot(fr_fabric *f, uint32_t dst, uint64_t deadline_ns,
                        fr_send_slot **out)
{
    int rc;
    while (!(*out = fr__get_slot(f)))
        if ((rc = fr__backoff(f, dst, deadline_ns)))
            return rc;
    return 0;
}

int fr__peer_err(int err, const char **why)
{
    const char *w = NULL;
    switch (err < 0 ? -err : err) {
    /* Not ENOTCONN, ECONNABORTED nor ECONNRESET: tcp;ofi_rxm reports
     * those when it or its peer drops a connection over a bad RMA key (a
     * stale or forged descriptor), and connects again on the next send
     * (ECONNRESET marked a live peer DEAD under TSan in CI, beside a
     * stale get); a dead peer is told by liveness (fr_liveness_suspect). udp;ofi_rxd
     * fails sends with ECONNREFUSED after 50 retransmissions without an
     * acknowledgement (minutes, backed off to 4 s each): it sends to
     * that peer no more, so unreachable is the word. */
    case FI_ECONNREFUSED: w = "connection refused"; break;
    case FI_EHOSTUNREACH: w = "host unreachable"; break;
    case FI_ENETUNREACH: w = "network unreachable"; break;
    case FI_EADDRNOTAVAIL: w = "address not available"; break;
    default: break;
    }
    if (why)
        *why = w;
    return w ? FRPC_EPEERLOST : FRPC_ETRANSPORT;
}

void fr__note_unreachable(fr_fabric *f, uint32_t dst, const char *why)
{
    if (dst >= f->world || !why || fr__lost(f, dst))
        return;
    f->unreach[dst] = why;
    f->unreach_any = 1;
}

void fr__note_dropped(fr_fabric *f, uint32_t dst, int err)
{
    int e = err < 0 ? -err : err;
    /* ECANCELED: tcp;ofi_rxm cancels what was on a connection its peer
     * dropped (over a refused key); the others are dropped connections. */
    if (dst >= f->world || fr__lost(f, dst) ||
        !(e == FI_ECANCELED || e == FI_ENOTCONN || e == FI_ECONNABORTED ||
          e == FI_ECONNRESET || e == EPIPE))
        return;
    f->dropped[dst] = 1;
    f->unreach_any = 1;
}

/* One attempt to post len bytes of slot's buffer to dst: the provider's
 * return (-FI_EAGAIN: no room, or no credit, try again). */
static ssize_t post_slot_once(fr_fabric *f, fr_send_slot *sl, uint32_t dst,
                              size_t len)
{
    ssize_t ret = -FI_EAGAIN;
    sl->dst = dst;
    if (fr__tx_take(f)) {
        fr_tsan_sent();
        /* Before: it may complete at once. Sequentially consistent, as is
         * the look at dst's mark below: fr_fabric_peer_lost marks, then
         * looks over the slots, so one of the two sees the other. */
        atomic_store(&sl->posted_to, dst + 1);
        ret = fr_fault_hit(FR_FAULT_SEND_POST)
                  ? -FI_EOTHER
                  : fi_send(f->ep, sl->buf, len, NULL, f->peer[dst],
                            &sl->op.fictx);
        if (ret) {
            settle_slot(f, atomic_exchange(&sl->posted_to, 0));
        } else if (atomic_load(&f->lost[dst]) == FR_PEER_LOST) {
            /* dst was lost while we posted, its slots perhaps looked
             * over already: this one is an orphan too. */
            pthread_mutex_lock(&f->slot_lock);
            orphan_locked(f, sl, dst);
            pthread_mutex_unlock(&f->slot_lock);
        }
    }
    return ret;
}

/* After a message to dst is posted: its bell rung (shm: it may sleep on
 * it). Without a bell (tcp, sockets) the kernel wakes a receiver asleep
 * on its socket from within our send, so we cannot tell whether it did:
 * this thread yields once in its next spin all the same (comm/threads.h,
 * fr_woke_sleeper). */
static void wake_receiver(fr_fabric *f, uint32_t dst)
{
    if (f->bell)
        fr_doorbell_ring(f->bell, dst);
    else
        fr_woke_sleeper = 1;
}

/* After the attempt that settled (ret not -FI_EAGAIN): 0 once posted,
 * else the code (the slot still the caller's). */
static int post_settled(fr_fabric *f, uint32_t dst, ssize_t ret)
{
    if (ret)
        return fr__peer_err((int)ret, NULL);
    atomic_fetch_add_explicit(&f->st.messages, 1, memory_order_relaxed);
    wake_receiver(f, dst);
    return 0;
}

int fr__post_slot_or_keep(fr_fabric *f, fr_send_slot *sl, uint32_t dst,
                          size_t len, uint64_t deadline_ns)
{
    ssize_t ret;
    int rc;
    if (fr__unsendable(f, dst))
        return FRPC_EPEERLOST;
    while ((ret = post_slot_once(f, sl, dst, len)) == -FI_EAGAIN)
        if ((rc = fr__backoff(f, dst, deadline_ns)))
            return rc;
    return post_settled(f, dst, ret);
}

/* Sends len bytes of slot's buffer; the slot returns to the free list on
 * completion, or now if the send cannot be posted. */
int fr__post_slot(fr_fabric *f, fr_send_slot *sl, uint32_t dst, size_t len,
                     uint64_t deadline_ns)
{
    int rc = fr__post_slot_or_keep(f, sl, dst, len, deadline_ns);
    if (rc)
        fr__put_slot(f, sl);
    return rc;
}

/* Sends len bytes from buf with fi_inject (len <= inject_max). */
int fr__inject(fr_fabric *f, uint32_t dst, const void *buf, size_t len,
               uint64_t deadline_ns)
{
    ssize_t ret;
    int rc;
    if (fr__unsendable(f, dst))
        return FRPC_EPEERLOST;
    fr_tsan_sent();
    while ((ret = fr_fault_hit(FR_FAULT_SEND_POST)
                      ? -FI_EOTHER
                      : fi_inject(f->ep, buf, len, f->peer[dst])) == -FI_EAGAIN)
        if ((rc = fr__backoff(f, dst, deadline_ns)))
            return rc;
    if (ret)
        return fr__peer_err((int)ret, NULL);
    atomic_fetch_add_explicit(&f->st.messages, 1, memory_order_relaxed);
    wake_receiver(f, dst);
    return 0;
}

/* Copies bytes [off, off + n) of the frame hdr ++ payload to out. */
static void copy_frame_range(uint8_t *out, const uint8_t *hdr,
                             const uint8_t *payload, size_t off, size_t n)
{
    if (off < FR_ENV_HDR_SIZE) {
        size_t h = FR_ENV_HDR_SIZE - off < n ? FR_ENV_HDR_SIZE - off : n;
        memcpy(out, hdr + off, h);
        out += h;
        off += h;
        n -= h;
    }
    if (n)
        memcpy(out, payload + (off - FR_ENV_HDR_SIZE), n);
}

/* Sends the frame hdr ++ payload[0..len) as parts (parts.h), each an
 * inject of at most inject_max bytes. A failure leaves the parts sent so
 * far to their receiver's eviction; the caller's call ends with it. */
static int send_parts(fr_fabric *f, uint32_t dst, const uint8_t *hdr,
                      uint64_t token, const uint8_t *payload, size_t len,
                      uint64_t deadline_ns)
{
    size_t frame = FR_ENV_HDR_SIZE + len;
    /* Every part full but the last, not parts of even length: shm copies
     * an inject into the receiver's region under the region's lock, which
     * the receiver holds while it copies the previous part out, so a
     * short last part waits least. A 4096-byte call's round trip, 5
     * interleaved pairs (`latency --provider shm --sizes 4k,6000,8k
     * --baseline`): 5.55-5.99 us in two even parts, 4.78-5.09 in a full
     * one and 96 bytes; 8 KiB 8.55-9.27 -> 7.63-7.99. */
    size_t stride = f->inject_max - FR_ENV_HDR_SIZE;
    fr_env pe = {.kind = FR_ENV_PART,
                 .req_id = atomic_fetch_add(&f->next_split, 1),
                 .src_rank = f->rank,
                 .token = token};
    uint8_t part[4096];
    int rc;

    for (size_t off = 0; off < frame; off += pe.payload_len) {
        pe.payload_len = frame - off < stride ? frame - off : stride;
        pe.func_id = fr_env_part_place((uint32_t)off, (uint32_t)frame);
        if ((rc = fr_env_encode(&pe, part, sizeof(part))))
            return rc;
        copy_frame_range(part + FR_ENV_HDR_SIZE, hdr, payload, off,
                         pe.payload_len);
        if ((rc = fr__inject(f, dst, part, FR_ENV_HDR_SIZE + pe.payload_len,
                             deadline_ns)))
            return rc;
    }
    atomic_fetch_add_explicit(&f->st.split_sent, 1, memory_order_relaxed);
    return 0;
}

/* 1 if this thread may send a frame in parts now (see split_senders). */
static int take_split(fr_fabric *f)
{
    if (atomic_fetch_add(&f->split_senders, 1) < FR_SPLIT_SENDERS)
        return 1;
    atomic_fetch_sub(&f->split_senders, 1);
    return 0;
}

int fr__fabric_send_frame(fr_fabric *f, uint32_t dst, const fr_env *env,
                          const void *payload, size_t len,
                          uint64_t deadline_ns)
{
    size_t frame = FR_ENV_HDR_SIZE + len;
    fr_env e = *env;
    uint8_t buf[4096]; /* the header, and the whole frame for inject */
    int rc;

    e.src_rank = f->rank;
    e.token = dst == f->rank ? f->self_token : f->token;
    e.payload_len = len;
    if ((rc = fr_env_encode(&e, buf, sizeof(buf))))
        return rc;
    if (fr__batch_add(f, dst, buf, payload, len, deadline_ns)) {
        /* counted as sent: from here a failure ends its call by
         * on_send_error, as for a failed completion */
    } else if (frame <= f->inject_max) {
        if (len)
            memcpy(buf + FR_ENV_HDR_SIZE, payload, len);
        if ((rc = fr__inject(f, dst, buf, frame, deadline_ns)))
            return rc;
    } else if (frame <= f->split_max && take_split(f)) {
        rc = send_parts(f, dst, buf, e.token, payload, len, deadline_ns);
        atomic_fetch_sub(&f->split_senders, 1);
        if (rc)
            return rc;
    } else if (f->slotless) {
        return fr__rndv_send(f, dst, env, FR_RNDV_COPY, NULL, payload, len,
                             deadline_ns);
    } else {
        fr_send_slot *sl;
        if ((rc = acquire_slot(f, dst, deadline_ns, &sl)))
            return rc;
        memcpy(sl->buf, buf, FR_ENV_HDR_SIZE);
        if (len)
            memcpy(sl->buf + FR_ENV_HDR_SIZE, payload, len);
        sl->len = frame;
        sl->raw = 0;
        sl->ctl = 0;
        if ((rc = fr__post_slot(f, sl, dst, frame, deadline_ns)))
            return rc;
    }
    atomic_fetch_add(&f->st.sent, 1);
    atomic_fetch_add(&f->st.bytes_sent, frame);
    return 0;
}

int fr_fabric_send_raw(fr_fabric *f, uint32_t dst, const void *bytes,
                       size_t len, uint64_t deadline_ns)
{
    fr_send_slot *sl;
    int rc;

    if (!f || !bytes || len == 0 || len > f->opts.eager_max)
        return FRPC_EINVAL;
    if (!f->peer || dst >= f->world || f->peer[dst] == FI_ADDR_NOTAVAIL)
        return FRPC_ENORANK;
    if (fr__unsendable(f, dst))
        return FRPC_EPEERLOST;
    if ((rc = acquire_slot(f, dst, deadline_ns, &sl)))
        return rc;
    memcpy(sl->buf, bytes, len);
    sl->len = len;
    sl->raw = 1; /* no call to route a failure to */
    sl->ctl = 0;
    return fr__post_slot(f, sl, dst, len, deadline_ns);
}

/* The largest payload of a frame of kind: max_msg, but an error answer
 * (its text at most FR_ENV_MAX_ERRMSG) always goes, so that a call ends
 * with its error under however small a limit instead of by its timeout. */
size_t fr__max_payload(const fr_fabric *f, uint8_t kind)
{
    if (kind == FR_ENV_ERROR && f->opts.max_msg < FR_ENV_MAX_ERRMSG)
        return FR_ENV_MAX_ERRMSG;
    return f->opts.max_msg;
}

/* What every send checks before its payload goes anywhere. */
static int send_check(fr_fabric *f, uint32_t dst, const fr_env *env,
                      const void *payload, size_t len)
{
    if (!f || !env || (len && !payload))
        return FRPC_EINVAL;
    if (!f->peer || dst >= f->world || f->peer[dst] == FI_ADDR_NOTAVAIL)
        return FRPC_ENORANK;
    if (fr__unsendable(f, dst))
        return FRPC_EPEERLOST;
    if (len > fr__max_payload(f, env->kind))
        return FRPC_ETOOBIG;
    return 0;
}

int fr_fabric_send(fr_fabric *f, uint32_t dst, const fr_env *env,
                   const void *payload, size_t len, uint64_t deadline_ns)
{
    int rc = send_check(f, dst, env, payload, len);
    if (rc)
        return rc;
    if (FR_ENV_HDR_SIZE + len <= f->opts.eager_max)
        return fr__fabric_send_frame(f, dst, env, payload, len, deadline_ns);
    return fr__rndv_send(f, dst, env, FR_RNDV_COPY, NULL, payload, len,
                         deadline_ns);
}

int fr_fabric_send_lent(fr_fabric *f, uint32_t dst, const fr_env *env,
                        const void *payload, size_t len, uint64_t deadline_ns,
                        fr_fabric_loan *loan)
{
    int rc = send_check(f, dst, env, payload, len);
    if (!loan)
        return rc ? rc : FRPC_EINVAL;
    atomic_store(&loan->out, 0);
    if (!rc && len == 0)
        rc = FRPC_EINVAL;
    if (rc) {
        if (loan->returned) /* once per loan, also when none was lent */
            loan->returned(loan->ctx);
        return rc;
    }
    return fr__rndv_send(f, dst, env, FR_RNDV_LENT, loan, payload, len,
                         deadline_ns);
}

int fr_fabric_send_given(fr_fabric *f, uint32_t dst, const fr_env *env,
                         void *payload, size_t len, uint64_t deadline_ns)
{
    int rc = send_check(f, dst, env, payload, len);
    if (rc || len == 0) {
        free(payload);
        return rc ? rc : FRPC_EINVAL;
    }
    return fr__rndv_send(f, dst, env, FR_RNDV_GIVEN, NULL, payload, len,
                         deadline_ns);
}

int fr_fabric_send_block(fr_fabric *f, uint32_t dst, const fr_env *env,
                         void *block, size_t len, uint64_t deadline_ns)
{
    if (!f)
        return FRPC_EINVAL; /* no cache to give the block back to */
    int rc = send_check(f, dst, env, block, len);
    if (rc || len == 0 || FR_ENV_HDR_SIZE + len <= f->opts.eager_max) {
        if (!rc)
            rc = len ? fr__fabric_send_frame(f, dst, env, block, len,
                                             deadline_ns)
                     : FRPC_EINVAL;
        fr_fabric_release_block(f, block, len);
        return rc;
    }
    return fr__rndv_send(f, dst, env, FR_RNDV_BLOCK, NULL, block, len,
                         deadline_ns);
}

/* ---- receiving and progress ---------------------------------------- */

void fr__fabric_deliver(fr_fabric *f, fr_fabric_msg *msg)
{
    f->opts.cb.on_msg(f->opts.cb.ctx, msg);
}

/* Hands the upper layer an error that happened here, shaped as the error
 * frame the peer would have sent: a response that could not be received
 * ends its call instead of vanishing. */
void fr__fabric_local_error(fr_fabric *f, const fr_env *env, uint32_t peer,
                            int code, const char *text)
{
    fr_fabric_msg m = {0};
    m.env = *env;
    m.env.kind = FR_ENV_ERROR;
    m.env.flags = 0;
    m.env.status = code;
    m.env.src_rank = peer;
    m.payload = (const uint8_t *)text;
    m.len = strlen(text);
    m.env.payload_len = m.len;
    fr__fabric_deliver(f, &m);
}

int fr_fabric_refuse_by(fr_fabric *f, const fr_env *req, int code,
                        const char *text, uint64_t deadline_ns)
{
    fr_env e = {.kind = FR_ENV_ERROR, .req_id = req->req_id,
                .func_id = req->func_id, .status = code};
    size_t len = strlen(text);
    if (req->src_rank >= f->world)
        return FRPC_ENORANK;
    if (fr__unsendable(f, req->src_rank))
        return FRPC_EPEERLOST;
    return fr__fabric_send_frame(f, req->src_rank, &e, text,
                                 len < FR_ENV_MAX_ERRMSG ? len
                                                         : FR_ENV_MAX_ERRMSG,
                                 deadline_ns);
}

uint64_t fr__answer_deadline(const fr_env *req)
{
    /* A request carries its caller's time left in status (envelope v3):
     * past that nobody waits for the answer. */
    if (req->kind == FR_ENV_REQUEST && req->status > 0)
        return fr_deadline_ms(req->status);
    return fr_deadline_ms(FR_FABRIC_ANSWER_MS);
}

int fr_fabric_refuse(fr_fabric *f, const fr_env *req, int code,
                     const char *text)
{
    return fr_fabric_refuse_by(f, req, code, text, fr__answer_deadline(req));
}

static void handle_frame_at(fr_fabric *f, const uint8_t *hdr,
                            const uint8_t *body, size_t len, fi_addr_t src,
                            void **owned);

/* A part (parts.h): handled once its frame is whole, as a frame of its
 * own that must come from the rank that sent its parts. The whole has
 * its header at its end (fr_parts_new's head), so its payload starts a
 * malloc'd buffer that the upper layer may keep (fr_fabric_msg.owned):
 * a 4 KiB request or reply is not copied again there. */
static void on_part(fr_fabric *f, const fr_env *env, const uint8_t *payload,
                    fi_addr_t src)
{
    uint8_t *whole = NULL;
    size_t total = fr_env_part_total(env);
    fr_env in;
    int rc = f->parts ? fr_parts_add(f->parts, env->src_rank, env->req_id,
                                     total, fr_env_part_off(env), payload,
                                     env->payload_len, &whole)
                      : FRPC_EPROTO;
    if (rc == 0)
        return;
    const uint8_t *hdr = rc < 0 ? NULL : whole + (total - FR_ENV_HDR_SIZE);
    void *owned = whole;
    if (rc < 0 ||
        fr_env_decode_header(hdr, FR_ENV_HDR_SIZE, UINT64_MAX, &in) ||
        in.kind == FR_ENV_PART || (in.flags & FR_ENV_F_MORE) ||
        in.src_rank != env->src_rank)
        atomic_fetch_add(&f->st.dropped_malformed, 1);
    else
        handle_frame_at(f, hdr, whole, total, src, &owned);
    free(owned);
}

/* A member we marked lost still sends us requests (it was cut off from
 * rank 0's host, which told us, and the network is back): nothing it
 * sends is taken, so say so, once per request, or its calls to us wait
 * for ever. One inject, past the lost mark, no wait for room: lost if
 * there is none, like the request's answer would have been. */
#define FR_SEVERED_TEXT "it marked this rank lost and drops what this rank sends"

static void tell_severed(fr_fabric *f, uint32_t dst, uint64_t req_id)
{
    /* The header alone (tcp's inject size is 64 bytes): the receiver
     * says why itself (FR_SEVERED_TEXT). */
    uint8_t buf[FR_ENV_HDR_SIZE];
    fr_env e = {.kind = FR_ENV_ERROR, .flags = FR_ENV_F_SEVERED,
                .req_id = req_id, .src_rank = f->rank, .token = f->token,
                .status = FRPC_EPEERLOST};
    if (fr_env_encode(&e, buf, sizeof(buf)) || f->inject_max < sizeof(buf))
        return;
    fr_tsan_sent();
    if (fi_inject(f->ep, buf, sizeof(buf), f->peer[dst]) == 0)
        atomic_fetch_add_explicit(&f->st.messages, 1, memory_order_relaxed);
}

/* Handles the frame whose header is hdr[0..FR_ENV_HDR_SIZE) and payload
 * body[0..len - FR_ENV_HDR_SIZE). owned: NULL, or a malloc'd buffer that
 * body starts, offered to the upper layer with the message (set to NULL
 * when it was taken; the caller frees what is left). */
static void handle_frame_at(fr_fabric *f, const uint8_t *hdr,
                            const uint8_t *body, size_t len, fi_addr_t src,
                            void **owned)
{
    fr_env env;
    const uint8_t *payload;
    int rc, self;

    if (len < FR_ENV_HDR_SIZE ||
        fr_env_decode_header(hdr, FR_ENV_HDR_SIZE, UINT64_MAX, &env) ||
        env.src_rank >= f->world) {
        atomic_fetch_add(&f->st.dropped_malformed, 1);
        return;
    }
    /* From this rank itself: its own token, which never leaves this
     * process but in frames to itself, whatever source the provider
     * names. sockets names none (FI_ADDR_NOTAVAIL) for some messages to
     * itself: a self-call's answer was dropped as a stranger's in about
     * 1 run of 20 of the async stall test under load, and the call timed
     * out. */
    self = env.src_rank == f->rank && env.token == f->self_token;
    if (!self && f->check_src && f->peer[env.src_rank] != src) {
        /* Not sent by the rank it names: whatever its token says. */
        atomic_fetch_add(&f->st.dropped_stranger, 1);
        return;
    }
    if (fr__lost(f, env.src_rank)) {
        atomic_fetch_add(&f->st.dropped_lost, 1);
        if (env.kind == FR_ENV_REQUEST && !self && env.token == f->token)
            tell_severed(f, env.src_rank, env.req_id);
        return;
    }
    if (!self && env.token != f->token) {
        atomic_fetch_add(&f->st.dropped_token, 1);
        return;
    }
    rc = fr_env_decode_body(body, len - FR_ENV_HDR_SIZE,
                            fr__max_payload(f, env.kind), &env, &payload);
    if (rc == FRPC_ETOOBIG) {
        if (env.kind == FR_ENV_REQUEST)
            fr_fabric_refuse(f, &env, FRPC_ETOOBIG,
                           "request larger than the callee's limit");
        else if (env.kind == FR_ENV_RESPONSE)
            fr__fabric_local_error(f, &env, env.src_rank, FRPC_ETOOBIG,
                                   "reply larger than this rank's limit");
        if (env.flags & FR_ENV_F_RNDV)
            fr__rndv_refused(f, &env, body);
        return;
    }
    if (rc) {
        atomic_fetch_add(&f->st.dropped_malformed, 1);
        return;
    }
    env.flags &= (uint16_t)~FR_ENV_F_MORE; /* framing, not the call's */
    if (env.kind == FR_ENV_RNDV_DONE && env.req_id == FR_FABRIC_CONNECT_COOKIE)
        return; /* fr_fabric_connect_peers: its delivery was the point */
    if (env.kind == FR_ENV_PART) {
        on_part(f, &env, payload, src);
        return;
    }
    atomic_fetch_add(&f->st.received, 1);
    atomic_fetch_add(&f->st.bytes_received, len);
    if (env.kind == FR_ENV_RNDV_DONE) {
        fr__rndv_on_done(f, env.src_rank, env.req_id);
    } else if (env.flags & FR_ENV_F_RNDV) {
        fr__rndv_on_desc(f, &env, payload, env.payload_len);
    } else {
        fr_fabric_msg m = {.env = env, .payload = payload,
                           .len = env.payload_len, .owned = NULL};
        int severed = (env.flags & FR_ENV_F_SEVERED) && !self;
        if (severed) {
            m.payload = (const uint8_t *)FR_SEVERED_TEXT;
            m.len = m.env.payload_len = sizeof(FR_SEVERED_TEXT) - 1;
        } else if (owned && *owned && payload) {
            m.owned = *owned;
            m.owned_malloced = 1;
        }
        fr__fabric_deliver(f, &m);
        if (m.owned_malloced) /* only when offered: owned is set */
            *owned = m.owned;
        /* After its call ended with the sender's words: the rest of our
         * calls to it can never end otherwise (tell_severed). */
        if (severed && f->opts.cb.on_peer_unreachable &&
            !fr__lost(f, env.src_rank))
            f->opts.cb.on_peer_unreachable(f->opts.cb.ctx, env.src_rank,
                                           FR_SEVERED_TEXT);
    }
}

/* Handles the frames of the message under way not handled yet, in order,
 * wherever a handler's nested poll left off (the cursor is in f, as for
 * CQ entries: an inline handler run for one frame may wait for an answer
 * in a later frame of the same message; with the cursor on this stack it
 * waited to its timeout, 5 s in test_api under load, the request and the
 * answer to self coalesced): the number handled. A frame that does not
 * fit drops the rest of the message; each frame is checked alone by
 * handle_frame. The buffer stays valid until the outermost call returns:
 * it is reposted or freed only then, and a nested poll's own messages
 * leave the cursor at their end. */
static int handle_frames_left(fr_fabric *f)
{
    int handled = 0;
    size_t n;
    while (f->msg_pos < f->msg_len) {
        const uint8_t *frame = f->msg_buf + f->msg_pos;
        if (fr_env_frame_len(frame, f->msg_len - f->msg_pos, &n)) {
            atomic_fetch_add(&f->st.dropped_malformed, 1);
            f->msg_pos = f->msg_len;
            break;
        }
        f->msg_pos += n;
        handle_frame_at(f, frame, frame + FR_ENV_HDR_SIZE, n, f->msg_src,
                        NULL);
        handled++;
    }
    return handled;
}

/* One received message: one frame, or several back to back. Only when
 * the last one's frames are all handled (a nested poll drains them first:
 * poll_cq). */
static void handle_message(fr_fabric *f, const uint8_t *buf, size_t len,
                           fi_addr_t src)
{
    /* From an address no rank inserted (FI_ADDR_NOTAVAIL): each frame is
     * a stranger's (handle_frame) unless it is this rank's own. */
    fr_tsan_received();
    if (len == 0) { /* no frame at all */
        atomic_fetch_add(&f->st.dropped_malformed, 1);
        return;
    }
    f->msg_buf = buf;
    f->msg_len = len;
    f->msg_pos = 0;
    f->msg_src = src;
    handle_frames_left(f);
}

/* Ends the calls of the frames in buf[0..len) sent to dst: the message
 * carrying them failed (err: an FRPC_E* code). */
void fr__fail_frames(fr_fabric *f, uint32_t dst, const uint8_t *buf,
                     size_t len, int err)
{
    size_t pos = 0, n;
    atomic_fetch_add(&f->st.send_errors, 1);
    while (pos < len && fr_env_frame_len(buf + pos, len - pos, &n) == 0) {
        fr_env e;
        if (f->opts.cb.on_send_error &&
            fr_env_decode_header(buf + pos, n, UINT64_MAX, &e) == 0) {
            e.flags &= (uint16_t)~FR_ENV_F_MORE;
            f->opts.cb.on_send_error(f->opts.cb.ctx, dst, &e, err);
        }
        pos += n;
    }
}

static void handle_send_done(fr_fabric *f, fr_send_slot *s, int err)
{
    if (settle_slot(f, atomic_exchange(&s->posted_to, 0)) ==
        FR_SLOT_ORPHAN) {
        /* Its peer was lost meanwhile, and so were the calls its frames
         * carried (they ended FRPC_EPEERLOST): only the slot is left. */
        fr__put_slot(f, s);
        return;
    }
    const char *why = NULL;
    int code = err ? fr__peer_err(err, &why) : 0;
    if (err) {
        fr__note_unreachable(f, s->dst, why);
        fr__note_dropped(f, s->dst, err); /* what else was on it */
    }
    if (s->ctl) {
        int none = 0;
        if (err) {
            atomic_fetch_add(&f->st.send_errors, 1);
            atomic_compare_exchange_strong(&f->ctl_err, &none, code);
        }
        atomic_fetch_sub(&f->ctl_pending, 1);
    } else if (err && s->raw) {
        atomic_fetch_add(&f->st.send_errors, 1);
    } else if (err) {
        fr__fail_frames(f, s->dst, s->buf, s->len, code);
    }
    fr__put_slot(f, s);
}

/* Keeps a completion that would run a handler for the poll to handle
 * later (fr__backoff): 1 if held. A message is copied so that its receive
 * buffer is posted again now: peers waiting to send to us must not wait
 * for our wait. 0 without memory. */
static int hold(fr_fabric *f, fr_op *op, size_t len, int err, fi_addr_t src)
{
    int copy = op->type == FR_OP_RECV;
    fr_held *h = malloc(sizeof(*h) + (copy ? len : 0));
    if (!h)
        return 0;
    *h = (fr_held){.op = copy ? NULL : op, .len = len, .err = err,
                   .src = src};
    if (copy) {
        memcpy(h->data, ((fr_recv_buf *)op)->buf, len);
        repost(f, (fr_recv_buf *)op);
    }
    *f->held_tail = h;
    f->held_tail = &h->next;
    return 1;
}

static void handle_now(fr_fabric *f, fr_op *op, size_t len, int err,
                       fi_addr_t src)
{
    switch (op->type) {
    case FR_OP_RECV: {
        fr_recv_buf *r = (fr_recv_buf *)op;
        if (!err && len <= f->opts.eager_max) {
            handle_message(f, r->buf, len, src);
        } else if (!err || err == -FI_ETRUNC) {
            /* Longer than eager_max: no member sends one. Buffers have a
             * byte more than that, as udp;ofi_rxd truncates without
             * saying so (a whole buffer, no FI_ETRUNC): a message that
             * fills one was cut. On shm it went on into the sink. */
            atomic_fetch_add(&f->st.dropped_oversize, 1);
            if (f->sink && len > f->opts.eager_max + 1)
                madvise(f->sink, FR_SINK_BYTES, MADV_DONTNEED);
        }
        if (err != -FI_ECANCELED)
            repost(f, r);
        break;
    }
    case FR_OP_SEND:
        handle_send_done(f, (fr_send_slot *)op, err);
        break;
    case FR_OP_READ:
        if (f->rma_by_initiator)
            fr__ledger_drop(f, op);
        fr__rndv_on_read(f, (fr_read_chunk *)op, err);
        break;
    case FR_OP_RMA:
        if (f->rma_by_initiator)
            fr__ledger_drop(f, op);
        fr__rma_on_chunk(f, (fr_rma_chunk *)op, err);
        break;
    default:
        break;
    }
}

static void handle_completion(fr_fabric *f, fr_op *op, size_t len, int err,
                              fi_addr_t src)
{
    /* Sends' completions and failed receives run no handler. */
    if (!f->holding || op->type == FR_OP_SEND || op->type == FR_OP_RMA ||
        (op->type == FR_OP_RECV && err)) {
        handle_now(f, op, len, err, src);
    } else if (!hold(f, op, len, err, src)) {
        /* No memory to hold it: handle it now, one level deeper, as a
         * poll of its own (a handler waiting in it must see its answer). */
        int holding = f->holding;
        f->holding = 0;
        handle_now(f, op, len, err, src);
        f->holding = holding;
    }
}

_Thread_local uint64_t fr_taken_ns FR_TLS_FAST;

/* Handles the entries read and not handled yet, in order, wherever a
 * handler's nested poll left off (the entries stay in f, not on this
 * stack, so that the nested poll handles them): the number handled. */
static int handle_read(fr_fabric *f)
{
    int n = 0;
    while (f->cq_next < f->cq_n) {
        unsigned i = f->cq_next++;
        struct fi_cq_msg_entry e = f->cq_ent[i];
        fi_addr_t from = f->check_src ? f->cq_src[i] : FI_ADDR_UNSPEC;
        if (f->check_src && fr_fault_hit(FR_FAULT_CQ_NO_SOURCE))
            from = FI_ADDR_NOTAVAIL;
        handle_completion(f, e.op_context, e.len, 0, from);
        n++;
    }
    return n;
}

/* Reads and handles one batch of completions (first what an outer poll
 * of this thread read and has not handled): n handled, or an FRPC_E*. */
static int read_cq(fr_fabric *f)
{
    if (f->cq_next < f->cq_n)
        return handle_read(f);
    ssize_t n = f->check_src
                    ? fi_cq_readfrom(f->cq, f->cq_ent, FR_CQ_BATCH, f->cq_src)
                    : fi_cq_read(f->cq, f->cq_ent, FR_CQ_BATCH);

    if (n > 0) {
        if (f->opts.time_completions)
            fr_taken_ns = fr_now_ns();
        f->cq_n = (unsigned)n;
        f->cq_next = 0;
        return handle_read(f);
    }
    /* A test's error entry (fault.h): one without a context. */
    int forged = n == -FI_EAGAIN && fr_fault_hit(FR_FAULT_CQ_NO_CONTEXT);
    if (n == -FI_EAGAIN && !forged)
        return 0;
    if (n == -FI_EAVAIL || forged) {
        struct fi_cq_err_entry ee = {0};
        if (!forged && fi_cq_readerr(f->cq, &ee, 0) != 1)
            return 0;
        if (!ee.op_context) {
            /* shm's one-sided copy that failed as it was posted: the
             * ledger finds which (fail_ledger, at the end of the poll). */
            if (f->rma_by_initiator && !forged && fr__ledger_error(f))
                return 1;
            /* Nothing of ours to end (a provider's internal operation):
             * counted, never silent. */
            atomic_fetch_add(&f->st.cq_errors_unmatched, 1);
            return 0;
        }
        handle_completion(f, ee.op_context, ee.len,
                          ee.err ? -(int)ee.err : -FI_EIO, FI_ADDR_NOTAVAIL);
        return 1;
    }
    return FRPC_ETRANSPORT;
}

/* Handles the completions held while this thread waited to send. */
static int handle_held(fr_fabric *f)
{
    int n = 0;
    fr_held *h;
    if (atomic_load_explicit(&f->held_left, memory_order_relaxed))
        atomic_store(&f->held_left, 0); /* handled below, by this owner */
    while ((h = f->held_head)) {
        if (!(f->held_head = h->next))
            f->held_tail = &f->held_head;
        if (h->op)
            handle_now(f, h->op, h->len, h->err, h->src);
        else
            handle_message(f, h->data, h->len, h->src);
        free(h);
        n++;
    }
    return n;
}

/* Every delivery happens in here, so on_poll_end follows each of them:
 * new completions if read, then any held ones. */
/* The provider's reports of unreachable peers and dropped connections,
 * to the upper layer. */
static void report_unreachable(fr_fabric *f)
{
    f->unreach_any = 0;
    for (uint32_t r = 0; r < f->world; r++) {
        const char *why = f->unreach[r];
        if (f->dropped[r] && !why && !fr__lost(f, r) &&
            f->opts.cb.on_connection_dropped)
            f->opts.cb.on_connection_dropped(f->opts.cb.ctx, r);
        f->dropped[r] = 0;
        if (!why)
            continue;
        f->unreach[r] = NULL;
        if (f->opts.cb.on_peer_unreachable && !fr__lost(f, r))
            f->opts.cb.on_peer_unreachable(f->opts.cb.ctx, r, why);
    }
}

/* Ends the one-sided operations the ledger found failed: their reports
 * came without a context (ledger.c). The number ended. */
static int fail_ledger(fr_fabric *f)
{
    int n = 0;
    fr_op *op = fr__ledger_failed(f);
    while (op) {
        fr_op *next = op->led_next; /* op may be freed as it ends */
        handle_completion(f, op, 0, FR_ERR_COPY_FAILED, FI_ADDR_NOTAVAIL);
        op = next;
        n++;
    }
    return n;
}

static int poll_cq(fr_fabric *f, int read)
{
    /* Only the poll owner counts passes: a store, not a locked add. */
    atomic_store_explicit(
        &f->pass, atomic_load_explicit(&f->pass, memory_order_relaxed) + 1,
        memory_order_relaxed);
    if (f->unposted)
        repost_unposted(f);
    /* First what an outer poll of this thread left: the rest of the
     * message it was handling comes before anything read after it. */
    int rest = handle_frames_left(f);
    int n = read ? read_cq(f) : 0;
    int held = handle_held(f) + rest;
    if (atomic_load_explicit(&f->led_errs, memory_order_relaxed))
        held += fail_ledger(f);
    if (atomic_load_explicit(&f->lost_work, memory_order_relaxed) ||
        atomic_load_explicit(&f->transfers, memory_order_relaxed)) {
        int ended = fr__rndv_end_lost(f);
        if (ended > 0)
            held += ended;
    }
    if ((n > 0 || held > 0) && f->opts.cb.on_poll_end)
        f->opts.cb.on_poll_end(f->opts.cb.ctx);
    if (f->unreach_any)
        report_unreachable(f);
    return n < 0 ? n : n + held;
}

/* A send's wait for room on a thread that does not hold the CQ
 * (fr__backoff): if no other thread does, take it for one read that
 * handles send completions (room) and holds what would run a handler,
 * as the poll owner's own waits do. What it held is the next poll's,
 * whoever makes it (poll_cq handles held completions first): waiters
 * are woken for it. The batches go out as on every poll. n read, or
 * FRPC_EAGAIN if another thread polls. */
/* The poll for this thread if no other holds it: 1, else 0. */
static int take_poll(fr_fabric *f)
{
    if (pthread_mutex_trylock(&f->poll_lock))
        return 0;
    /* Release and acquire (fr_fabric_polling_here), not sequentially
     * consistent stores: only the owner's own reads may find itself, and
     * an xchg per store cost the poll of every 8-byte get. */
    atomic_store_explicit(&f->poll_owner, pthread_self(),
                          memory_order_relaxed);
    atomic_store_explicit(&f->poll_owned, 1, memory_order_release);
    return 1;
}

static void give_poll(fr_fabric *f)
{
    atomic_store_explicit(&f->poll_owned, 0, memory_order_release);
    pthread_mutex_unlock(&f->poll_lock);
}

static int poll_for_room(fr_fabric *f)
{
    fr__batch_flush(f);
    if (!take_poll(f))
        return FRPC_EAGAIN;
    if (f->unposted)
        repost_unposted(f);
    f->holding++;
    int n = read_cq(f);
    f->holding--;
    int held = f->held_head != NULL;
    if (held)
        atomic_store(&f->held_left, 1);
    give_poll(f);
    if (held)
        fr_fabric_wake_all(f);
    return n;
}

/* The poll owner's turn: poll, send our batches, and handle what our
 * sends held (they may hold more) before the lock may go. */
static int poll_as_owner(fr_fabric *f, int read)
{
    int rc = poll_cq(f, read);
    fr__batch_flush_own(f);
    while (f->held_head) {
        int n = poll_cq(f, 0);
        if (rc >= 0)
            rc += n;
        fr__batch_flush_own(f);
    }
    return rc;
}

/* How long settle waits after the last delivery that matters: one pass
 * finding nothing is not "nothing more has arrived" where the provider
 * takes several progress passes to complete a message already in the
 * kernel's socket buffer (sockets: an answer sent before its sender left
 * ended the caller's call FRPC_EPEERLOST). */
#define FR_SETTLE_QUIET_NS (20u * 1000000u)
/* ... and how many passes, by any poller, must begin after it: the spell
 * counts other pollers' passes, since while another thread holds the
 * poll settle's own polls only see FRPC_EAGAIN (a rank resumed from
 * SIGSTOP under TSan had its progress thread deliver the goodbyes that
 * waited in its sockets 2-54 ms into the settle, one pass taking 14 ms;
 * a settle that counted only its own polls ended before the last one). */
#define FR_SETTLE_PASSES 3

/* Only deliveries that matter restart the spell (probe's count moving):
 * while unrelated traffic flows, a spell that any completion restarted
 * never ended before the deadline (a death verdict waited the whole
 * 500 ms of FR_BYE_MS under a peer's calls every 3 ms: run_peer_lost's
 * answers-before-bye case, own CI). */
void fr_fabric_settle(fr_fabric *f, uint64_t deadline_ns,
                      fr_settle_probe probe, void *ctx)
{
    if (!f || fr_fabric_polling_here(f))
        return;
    uint64_t mark = atomic_load(&f->pass), probed = mark;
    uint64_t seen = probe(ctx);
    uint64_t quiet_from = fr_now_ns();
    while (fr_now_ns() < deadline_ns) {
        int n = fr_fabric_progress(f);
        if (n == FRPC_ETRANSPORT)
            return;
        /* The probe may take a lock the pollers need: once per pass. */
        uint64_t pass = atomic_load(&f->pass);
        if (pass != probed) {
            uint64_t now = probe(ctx);
            probed = pass;
            if (now != seen) {
                seen = now;
                mark = pass;
                quiet_from = fr_now_ns();
                continue;
            }
        }
        if (fr_now_ns() - quiet_from >= FR_SETTLE_QUIET_NS &&
            pass >= mark + FR_SETTLE_PASSES)
            return;
        if (n == 0) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        } else {
            sched_yield();
        }
    }
}

int fr_fabric_polling_here(fr_fabric *f)
{
    /* Owned seen set (acquire): the owner read is its taker's. */
    return atomic_load_explicit(&f->poll_owned, memory_order_acquire) &&
           pthread_equal(atomic_load_explicit(&f->poll_owner,
                                              memory_order_relaxed),
                         pthread_self());
}

/* A poll by this thread if no other holds the CQ: FRPC_EAGAIN if one
 * does. read 0: only what needs no CQ read (the ends of transfers with
 * lost peers). */
static int poll_once(fr_fabric *f, int read)
{
    int rc;

    fr_taken_ns = 0; /* an earlier poll's time is not this one's */
    /* Batches go out on every poll, also while another thread holds the
     * CQ (it may be in a long inline handler). */
    fr__batch_flush(f);
    if (fr_fabric_polling_here(f)) {
        rc = poll_as_owner(f, read); /* nested: a handler of ours waits */
    } else {
        if (!take_poll(f))
            return FRPC_EAGAIN;
        rc = poll_as_owner(f, read);
        give_poll(f);
    }
    fr__batch_flush(f); /* what the handlers just answered */
    return rc;
}

int fr_fabric_progress(fr_fabric *f)
{
    return poll_once(f, 1);
}

typedef struct recheck_ctx {
    fr_fabric *f;
    int (*done)(void *);
    void *arg;
    int waiter; /* counted in waiters: fr_fabric_wait_for's */
} recheck_ctx;

/* Before a doorbell sleep: > 0 means do not sleep. A waiter sleeps even
 * while another thread polls: that thread rings our bell if it completes
 * our call (fr_fabric_wake_sleepers). */
static int recheck_cq(void *p)
{
    recheck_ctx *c = p;
    int n = fr_fabric_progress(c->f);
    if (c->waiter)
        return n > 0 || c->done(c->arg);
    if (n > 0 || n == FRPC_EAGAIN) /* another poller: do not sleep */
        return 1;
    return c->done && c->done(c->arg);
}

static void wait_impl(fr_fabric *f, unsigned timeout_us,
                      int (*done)(void *), void *arg, int waiter)
{
    /* Counted before the last look at done: a completion after it sees
     * us and wakes us (fr_fabric_wake_sleepers). */
    if (waiter)
        atomic_fetch_add(&f->waiters, 1);
    /* Batches kept for want of room are tried by polls only: a sleep
     * must not outlast them by much (nor end before their deadlines). */
    if (fr__batches_stalled(f) && timeout_us > FR_STALL_RETRY_US)
        timeout_us = FR_STALL_RETRY_US;
    if (f->wait_fd < 0 && f->bell) {
        recheck_ctx c = {.f = f, .done = done, .arg = arg, .waiter = waiter};
        fr_doorbell_sleep(f->bell, timeout_us, recheck_cq, &c);
    } else if (f->wait_fd >= 0) {
        struct fid *fids[1] = {&f->cq->fid};
        if (fi_trywait(f->fabric, fids, 1) == 0 && !(done && done(arg)) &&
            !atomic_load(&f->held_left)) {
            struct pollfd p = {.fd = f->wait_fd, .events = POLLIN};
            poll(&p, 1, (int)((timeout_us + 999) / 1000));
        }
    } else {
        struct timespec ts = {.tv_sec = timeout_us / 1000000,
                              .tv_nsec = (long)(timeout_us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
    if (waiter)
        atomic_fetch_sub(&f->waiters, 1);
}

void fr_fabric_wait_for(fr_fabric *f, unsigned timeout_us,
                        int (*done)(void *), void *arg)
{
    wait_impl(f, timeout_us, done, arg, done != NULL);
}

void fr_fabric_wait(fr_fabric *f, unsigned timeout_us)
{
    wait_impl(f, timeout_us, NULL, NULL, 0);
}

void fr_fabric_wait_unless(fr_fabric *f, unsigned timeout_us,
                           int (*early)(void *), void *arg)
{
    wait_impl(f, timeout_us, early, arg, 0);
}

void fr_fabric_wake_all(fr_fabric *f)
{
    if (f->wait_fd >= 0)
        fi_cq_signal(f->cq);
    else if (f->bell)
        fr_doorbell_ring(f->bell, f->rank); /* our own */
}

void fr_fabric_end_waits(fr_fabric *f)
{
    if (f)
        atomic_store(&f->waits_ended, 1);
}

void fr_fabric_wake_keeper(void *fab)
{
    fr_fabric_wake_all(fab);
}

void fr_fabric_wake_sleepers(void *fab)
{
    fr_fabric *f = fab;
    if (f && atomic_load(&f->waiters) > 0)
        fr_fabric_wake_all(f);
}

int fr_fabric_has_fd(const fr_fabric *f)
{
    return f->wait_fd >= 0;
}

void fr_fabric_get_stats(const fr_fabric *f, fr_fabric_stats *o)
{
    fr_fabric *m = (fr_fabric *)f;
    o->sent = atomic_load(&m->st.sent);
    o->received = atomic_load(&m->st.received);
    o->bytes_sent = atomic_load(&m->st.bytes_sent);
    o->bytes_received = atomic_load(&m->st.bytes_received);
    o->dropped_malformed = atomic_load(&m->st.dropped_malformed);
    o->dropped_token = atomic_load(&m->st.dropped_token);
    o->send_errors = atomic_load(&m->st.send_errors);
    o->rndv_sent = atomic_load(&m->st.rndv_sent);
    o->rndv_lent = atomic_load(&m->st.rndv_lent);
    o->rndv_received = atomic_load(&m->st.rndv_received);
    o->rndv_blocks_reused = atomic_load(&m->st.rndv_blocks_reused);
    o->rndv_unread_late = atomic_load(&m->st.rndv_unread_late);
    o->blocks_trimmed = atomic_load(&m->st.blocks_trimmed);
    o->blocks_cached_bytes = fr__block_cache_bytes(&m->out_cache) +
                             fr__block_cache_bytes(&m->in_cache);
    o->coalesced = atomic_load(&m->st.coalesced);
    o->messages = atomic_load(&m->st.messages);
    o->dropped_stranger = atomic_load(&m->st.dropped_stranger);
    o->dropped_oversize = atomic_load(&m->st.dropped_oversize);
    o->dropped_lost = atomic_load(&m->st.dropped_lost);
    o->recv_repost_failed = atomic_load(&m->st.recv_repost_failed);
    o->recv_unposted = atomic_load(&m->st.recv_unposted);
    o->cq_errors_unmatched = atomic_load(&m->st.cq_errors_unmatched);
    o->rma_bytes = atomic_load(&m->st.rma_bytes);
    o->split_sent = atomic_load(&m->st.split_sent);
    o->parts_dropped = m->parts ? fr_parts_dropped(m->parts) : 0;
    o->dropped_malformed += o->parts_dropped;
}

int fr_fabric_peer_is_lost(const fr_fabric *f, uint32_t rank)
{
    if (!f || !f->lost || rank >= f->world)
        return 0;
    return fr__lost((fr_fabric *)f, rank);
}

int fr_fabric_peer_departing(fr_fabric *f, uint32_t rank)
{
    unsigned char none = 0;
    if (!f || !f->lost || rank >= f->world)
        return FRPC_EINVAL;
    atomic_compare_exchange_strong(&f->lost[rank], &none, FR_PEER_DEPARTING);
    return 0;
}

/* Slot sends still posted to rank, now lost, become orphans: their
 * transmit entries come back now and new slots may be made in their
 * place (over shm nobody will read them, and their completions may never
 * come; if one does, handle_send_done frees the slot). */
static void orphan_slots(fr_fabric *f, uint32_t rank)
{
    pthread_mutex_lock(&f->slot_lock);
    for (unsigned i = 0; i < f->nslots; i++)
        orphan_locked(f, f->all_slots[i], rank);
    pthread_mutex_unlock(&f->slot_lock);
}

int fr_fabric_peer_lost(fr_fabric *f, uint32_t rank)
{
    fr_send_slot *sl;
    size_t len;

    if (!f || !f->lost || rank >= f->world)
        return FRPC_EINVAL;
    if (atomic_exchange(&f->lost[rank], FR_PEER_LOST) == FR_PEER_LOST)
        return 0;
    /* Frames waiting in the shared batch: their calls end now. (The
     * poll owner's own batch fails at its next flush: every send checks
     * the mark.) The batch stays listed, empty. */
    pthread_mutex_lock(&f->batch_lock);
    fr_batch *b = &f->shared.per_peer[rank];
    sl = b->slot;
    len = b->len;
    b->slot = NULL;
    b->len = 0;
    b->deadline = 0;
    pthread_mutex_unlock(&f->batch_lock);
    if (sl) {
        fr__fail_frames(f, rank, sl->buf, len, FRPC_EPEERLOST);
        fr__put_slot(f, sl);
    }
    orphan_slots(f, rank);
    fr__rndv_drop_out(f, rank);
    fr_parts_drop_source(f->parts, rank);
    /* Incoming transfers end in a poll (they deliver): ours now if the
     * CQ is free, else the owner's, which a sleeper's wake-up starts. */
    atomic_fetch_add(&f->lost_work, 1);
    if (!fr_fabric_polling_here(f))
        poll_once(f, 0);
    if (f->wait_fd >= 0)
        fi_cq_signal(f->cq);
    else if (f->bell)
        fr_doorbell_ring(f->bell, f->rank);
    return 0;
}

/* The caller's check of the job while peers are still to be reached:
 * asked at most every FR_FABRIC_CONNECT_CHECK_MS (a store round trip). */
typedef struct connect_check {
    fr_fabric_check_fn fn;
    void *ctx;
    uint64_t next_ns;
} connect_check;

static int check_job(connect_check *c)
{
    uint64_t now = fr_now_ns();
    if (!c->fn || now < c->next_ns)
        return 0;
    c->next_ns = now + FR_FABRIC_CONNECT_CHECK_MS * 1000000ull;
    return c->fn(c->ctx);
}

static int connect_round(fr_fabric *f, uint64_t deadline_ns,
                         connect_check *check);

/* A link that came up a moment ago (a host booting, a fresh interface)
 * may fail the first connection with a provider error that is not a
 * peer's refusal: try again, a few times, within the deadline. */
#define FR_CONNECT_TRIES 5
#define FR_CONNECT_PAUSE_NS 100000000ull

int fr_fabric_connect_peers(fr_fabric *f, uint64_t deadline_ns,
                            fr_fabric_check_fn check, void *ctx)
{
    connect_check c = {.fn = check, .ctx = ctx,
                       .next_ns = fr_now_ns() +
                                  FR_FABRIC_CONNECT_CHECK_MS * 1000000ull};
    int rc = FRPC_ETRANSPORT;
    if (fr_fault_hit(FR_FAULT_CONNECT_DIES))
        _exit(9);
    for (int i = 0; i < FR_CONNECT_TRIES && rc == FRPC_ETRANSPORT; i++) {
        if (i) {
            if (fr_now_ns() + FR_CONNECT_PAUSE_NS >= deadline_ns)
                break;
            struct timespec ts = {0, (long)FR_CONNECT_PAUSE_NS};
            nanosleep(&ts, NULL);
            if ((rc = check_job(&c)))
                break;
        }
        rc = connect_round(f, deadline_ns, &c);
    }
    return rc;
}

/* Posts the connect frame (hdr) to every peer not yet done (todo[r]), one
 * attempt each: a peer whose post finds no room waits for the next pass,
 * so that no rank waits on one peer while the others idle. The number
 * still to do, or an FRPC_E* code (negative). */
static int connect_pass(fr_fabric *f, const uint8_t *hdr, uint8_t *todo,
                        uint64_t deadline_ns)
{
    int left = 0;
    /* Each rank starts with the rank after it: were all to start with
     * rank 0, every rank would post to the same peer at once, and on shm a
     * post takes a spinlock in the peer's region (32 ranks on 2 cores:
     * holders preempted, the others spinning their time slices). */
    for (uint32_t k = 1; k < f->world; k++) {
        uint32_t r = (f->rank + k) % f->world;
        fr_send_slot *sl;
        int rc;
        if (!todo[r])
            continue;
        if (fr__lost(f, r))
            return FRPC_EPEERLOST;
        if ((rc = acquire_slot(f, r, deadline_ns, &sl)))
            return rc;
        memcpy(sl->buf, hdr, FR_ENV_HDR_SIZE);
        sl->len = FR_ENV_HDR_SIZE;
        sl->raw = 0;
        sl->ctl = 1;
        atomic_fetch_add(&f->ctl_pending, 1);
        ssize_t ret = post_slot_once(f, sl, r, FR_ENV_HDR_SIZE);
        if (ret == -FI_EAGAIN) {
            /* shm's first try left its connection request with r */
            if (fr_fault_hit(FR_FAULT_CONNECT_SENT_DIES))
                exit(9);
            atomic_fetch_sub(&f->ctl_pending, 1);
            fr__put_slot(f, sl);
            left++;
            continue;
        }
        todo[r] = 0;
        if ((rc = post_settled(f, r, ret))) {
            atomic_fetch_sub(&f->ctl_pending, 1);
            fr__put_slot(f, sl);
            return rc;
        }
    }
    return left;
}

/* One frame to every peer, each waited for. */
static int connect_round(fr_fabric *f, uint64_t deadline_ns,
                         connect_check *check)
{
    uint8_t hdr[FR_ENV_HDR_SIZE];
    fr_env e = {.kind = FR_ENV_RNDV_DONE, .req_id = FR_FABRIC_CONNECT_COOKIE};
    int rc = 0, left;

    if (!f || !f->peer)
        return FRPC_EINVAL;
    e.src_rank = f->rank;
    e.token = f->token;
    if (fr_env_encode(&e, hdr, sizeof(hdr)))
        return FRPC_EINVAL;
    uint8_t *todo = calloc(f->world, 1);
    if (!todo)
        return FRPC_ENOMEM;
    for (uint32_t r = 0; r < f->world; r++)
        todo[r] = r != f->rank && f->peer[r] != FI_ADDR_NOTAVAIL;
    atomic_store(&f->ctl_err, 0);
    while ((left = connect_pass(f, hdr, todo, deadline_ns)) > 0)
        if ((rc = fr__backoff(f, f->world, deadline_ns)) ||
            (rc = check_job(check)))
            break;
    if (left < 0)
        rc = left;
    free(todo);
    /* Every frame posted is waited for, also after a failure to post
     * one, until the deadline; a slot the provider still holds then goes
     * back to the pool on its completion, as any send's. */
    while (atomic_load(&f->ctl_pending) > 0) {
        int lost;
        if (fr_now_ns() >= deadline_ns)
            return rc ? rc : FRPC_ETIMEDOUT;
        if ((lost = check_job(check)))
            return rc ? rc : lost;
        if (fr_fabric_progress(f) == FRPC_EAGAIN)
            sched_yield();
    }
    if (!rc)
        rc = atomic_load(&f->ctl_err);
    return rc;
}

/* Slot sends still with the provider, to peers not lost (a lost peer's
 * may never complete), and batches kept for want of room. */
static int sends_out(fr_fabric *f)
{
    int n = (int)fr__batches_stalled(f);
    pthread_mutex_lock(&f->slot_lock);
    for (unsigned i = 0; i < f->nslots; i++) {
        unsigned to = atomic_load_explicit(&f->all_slots[i]->posted_to,
                                           memory_order_relaxed);
        if (to && to != FR_SLOT_ORPHAN && !fr__lost(f, to - 1))
            n++;
    }
    pthread_mutex_unlock(&f->slot_lock);
    return n;
}

int fr_fabric_flush(fr_fabric *f, uint64_t deadline_ns)
{
    fr_fabric_end_lingers(f);
    for (;;) {
        int n = fr_fabric_progress(f);
        if (n == 0 && sends_out(f) == 0)
            return 0;
        if (fr_now_ns() >= deadline_ns)
            return FRPC_ETIMEDOUT;
        if (n <= 0) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
}

/* 1 while a one-sided operation to a rank not lost is out: one to a lost
 * rank may never be given back (shm: its owner died), and closing the
 * endpoint ends it. */
static int rma_ops_owed(fr_fabric *f)
{
    for (uint32_t r = 0; r < f->world; r++)
        if (atomic_load(&f->rma_ops_to[r]) > 0 && !fr__lost(f, r))
            return 1;
    return 0;
}

int fr_fabric_rma_ops_to(fr_fabric *f, uint32_t dst)
{
    return dst < f->world ? atomic_load(&f->rma_ops_to[dst]) : 0;
}

int fr_fabric_quiesce(fr_fabric *f, uint64_t deadline_ns)
{
    while (rma_ops_owed(f)) {
        if (fr_now_ns() >= deadline_ns)
            return FRPC_ETIMEDOUT;
        if (fr_fabric_progress(f) <= 0) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    return 0;
}

/* 1 while the provider holds a one-sided operation to a lost rank. Over
 * tcp (rxm), such a read to a host that vanished stays posted (its
 * connection is neither up nor reset), and closing the endpoint then
 * crashed inside libfabric 1.17 (rxm's flush of the cancelled operations:
 * SIGSEGV in fi_close, every survivor's shutdown after a 16 MiB get or
 * rendezvous to a vanished host). A rank killed resets its connections:
 * its operations come back with errors and the close is safe. */
static int provider_holds_lost_ops(fr_fabric *f)
{
    for (uint32_t r = 0; r < f->world; r++)
        if (atomic_load(&f->rma_ops_to[r]) > 0 && fr__lost(f, r))
            return 1;
    return 0;
}

/* Fabrics fr_fabric_close left open, kept reachable: what the provider
 * still names is held, not leaked (leak checkers agree), for the life of
 * the process. */
static fr_fabric *parked;
static pthread_mutex_t parked_lock = PTHREAD_MUTEX_INITIALIZER;

void fr_fabric_close(fr_fabric *f)
{
    if (!f)
        return;
    /* Before the payloads offered to be read go (loans returned, blocks
     * freed): a same-host reader copying them now throws its copy away. */
    fr_doorbell_end(f->bell);
    /* Then the provider's objects are left open, and the memory its
     * posted operations name (their contexts, receive buffers, send
     * slots, read targets) is not freed: nothing polls them again. A
     * bounded leak, once per such shutdown, instead of a crash. */
    int keep = provider_holds_lost_ops(f);
    if (f->ep && !keep)
        fi_close(&f->ep->fid); /* shm removes its region's name */
    if (keep) /* the region stays mapped here, not listed in /dev/shm */
        fr_exit_unlink_now(f->exit_name);
    else
        fr_exit_unlink_drop(f->exit_name);
    fr__rndv_free_all(f, keep);
    fr__rma_free_all(f, keep);
    /* The cached blocks' registrations before the domain: closed after
     * it, the domain was still busy with them and stayed open (valgrind:
     * fi_fabric's and fi_domain's memory lost after frpc_shutdown once a
     * payload between the inject size and zerocopy_min had used a block). */
    fr__block_cache_destroy(&f->out_cache);
    fr__block_cache_destroy(&f->in_cache);
    if (!keep) {
        fr__rma_close_regions(f); /* before the domain */
        if (f->av)
            fi_close(&f->av->fid);
        if (f->cq)
            fi_close(&f->cq->fid);
        if (f->domain)
            fi_close(&f->domain->fid);
        if (f->fabric)
            fi_close(&f->fabric->fid);
    }
    if (f->recv && !keep)
        for (unsigned i = 0; i < f->opts.recv_count; i++)
            free(f->recv[i].buf);
    if (f->sink && !keep)
        munmap(f->sink, FR_SINK_BYTES);
    fr_parts_free(f->parts);
    if (!keep)
        free(f->recv);
    while (f->held_head) { /* only if its poll owner never came back */
        fr_held *h = f->held_head;
        f->held_head = h->next;
        free(h);
    }
    for (unsigned i = 0; i < f->nslots && !keep; i++) {
        free(f->all_slots[i]->buf);
        free(f->all_slots[i]);
    }
    if (!keep)
        free(f->all_slots);
    fr__batch_free(f);
    free(f->peer);
    free((void *)f->lost);
    free((void *)f->unreach);
    free(f->dropped);
    free((void *)f->rma_ops_to);
    if (f->info)
        fi_freeinfo(f->info);
    pthread_mutex_destroy(&f->slot_lock);
    pthread_mutex_destroy(&f->poll_lock);
    pthread_mutex_destroy(&f->batch_lock);
    if (keep) {
        pthread_mutex_lock(&parked_lock);
        f->parked_next = parked;
        parked = f;
        pthread_mutex_unlock(&parked_lock);
        return;
    }
    free(f);
}
