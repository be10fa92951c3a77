/*
 * Registered memory (rpc/fabrpc.h): frpc_mem handles and descriptors.
 * The transfers that use them are in transfer.c.
 *
 * Design notes
 * - busy counts the transfers the provider may still touch the region
 *   through; frpc_mem_deregister waits for it to reach 0. The fabric ends
 *   a lost peer's transfers at once (done with FRPC_EPEERLOST), so a dead
 *   rank never holds a region.
 * - Every descriptor is checked here before anything is posted (comm/
 *   memdesc.c: format, the job-keyed check value, the rank), then its
 *   access and bounds; the owner's provider checks the key itself.
 * - Where this rank's transfers are emulated (emu.c) a region is not
 *   registered with the provider (mr NULL): its descriptors say the owner
 *   serves it by messages, with its id as key. Every region, native or
 *   not, can be served so (emu_serve.c finds it by id on the list);
 *   serving counts the peers' requests copying its bytes now, and
 *   deregistration waits for them after unlinking it.
 * - Where the provider checks no key (shm's fast path), fabric lists
 *   each region (fr_fabric_region_list) and peers' transfers hold the
 *   listing while they may copy: deregistration seals it and waits for
 *   the holds, as it waits for busy. A region that finds every slot
 *   taken is served by messages instead, correct but slower.
 * - Shutdown ends every registration before the fabric closes; the
 *   handles stay, with no agent, for frpc_mem_deregister to free.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/memdesc.h"
#include "rpc/mem.h"

static void link_locked(frpc_agent *a, frpc_mem *m)
{
    m->prev = NULL;
    m->next = a->mems;
    if (a->mems)
        a->mems->prev = m;
    a->mems = m;
}

static int reg(frpc_agent *a, void *buf, size_t len, int access,
               frpc_mem **out);

int frpc_mem_register(frpc_agent *a, void *buf, size_t len, int access,
                      frpc_mem **out)
{
    if (out)
        *out = NULL;
    if (!a || !buf || !out || len == 0 ||
        (access & ~(FRPC_MEM_REMOTE_READ | FRPC_MEM_REMOTE_WRITE)))
        return FRPC_EINVAL;
    /* Every transfer reads or writes the region in this process: memory it
     * may not read (or not memory at all) would kill it, and so would a
     * peer's put into pages it may not write. */
    unsigned perms = fr_range_perms(buf, len);
    if (!(perms & FR_RANGE_READ) ||
        ((access & FRPC_MEM_REMOTE_WRITE) && !(perms & FR_RANGE_WRITE)))
        return FRPC_EINVAL;
    /* Counted inside, the check after: a shutdown on another thread ends
     * the regions (fr_mem_end_all) and closes the domain only once this
     * left, so a region registered meanwhile is among those it ends. */
    fr_agent_enter(a);
    int rc = reg(a, buf, len, access, out);
    fr_agent_leave(a);
    if (rc == 0)
        (*out)->writable = (perms & FR_RANGE_WRITE) != 0;
    return rc;
}

static int reg(frpc_agent *a, void *buf, size_t len, int access,
               frpc_mem **out)
{
    frpc_mem *m;
    int rc;

    if (atomic_load(&a->shutting_down) || !a->fab)
        return FRPC_ESHUTDOWN;
    if (!(m = calloc(1, sizeof(*m))))
        return FRPC_ENOMEM;
    /* Emulated transfers need no registration with the provider: the
     * owner copies (emu_serve.c). */
    if (!a->rma_emulated &&
        (rc = fr_fabric_mr_reg(a->fab, buf, len, (unsigned)access,
                               &m->mr))) {
        free(m);
        return rc;
    }
    m->id = atomic_fetch_add(&a->next_region_id, 1);
    if (m->mr)
        m->slot = fr_fabric_region_list(a->fab, m->id);
    m->by_messages =
        !m->mr || (!m->slot && fr_fabric_regions_checked(a->fab));
    atomic_init(&m->serving, 0);
    m->agent = a;
    m->buf = buf;
    m->len = len;
    m->access = (unsigned)access;
    atomic_init(&m->busy, 0);
    pthread_mutex_lock(&a->mem_lock);
    link_locked(a, m);
    pthread_mutex_unlock(&a->mem_lock);
    atomic_fetch_add(&a->mem_registered, 1);
    *out = m;
    return 0;
}

static void unlink_locked(frpc_agent *a, frpc_mem *m)
{
    if (m->prev)
        m->prev->next = m->next;
    else
        a->mems = m->next;
    if (m->next)
        m->next->prev = m->prev;
    m->next = m->prev = NULL;
}

static int deregister(frpc_agent *a, frpc_mem *m, int timeout_ms);

int frpc_mem_deregister(frpc_mem *m, int timeout_ms)
{
    if (!m)
        return FRPC_EINVAL;
    frpc_agent *a = m->agent;
    if (!a) { /* shutdown ended it */
        free(m);
        return 0;
    }
    /* Counted inside: it polls the fabric while it waits, and shutdown
     * must not end the region nor close the fabric under it. */
    fr_agent_enter(a);
    int rc = deregister(a, m, timeout_ms);
    fr_agent_leave(a);
    return rc;
}

/* One step of a wait for transfers, which end in polls: make one, or
 * let the poller. FRPC_ESHUTDOWN once the agent's end began: it fails
 * the transfers, but they stay with the fabric until it gives them back,
 * after this thread left, and the end finishes the region itself
 * (fr_mem_end_all). */
static int wait_step(frpc_agent *a)
{
    if (fr_pending_closed(&a->pend))
        return FRPC_ESHUTDOWN;
    fr_progress_poll_or_nap(a);
    return 0;
}

/* Seals m's listing and waits, up to deadline, until no peer's transfer
 * holds it (each passed its check before the seal, and may copy until
 * its provider gives it back). On a failure the listing is unsealed:
 * m stays registered as it was. */
static int wait_unheld(frpc_agent *a, frpc_mem *m, uint64_t deadline)
{
    int rc = 0;
    if (!m->slot)
        return 0;
    fr_fabric_region_seal(a->fab, m->slot);
    while (fr_fabric_region_held(a->fab, m->slot))
        if ((rc = fr_now_ns() >= deadline ? FRPC_ETIMEDOUT : wait_step(a)))
            break;
    if (rc)
        fr_fabric_region_unseal(a->fab, m->slot, m->id);
    return rc;
}

/* 1 if peers' native transfers on m are moved by this rank's provider
 * from and into m's memory after their key was checked (tcp, sockets):
 * not where m is listed (shm: the holds), served by messages, or offers
 * peers no access. */
static int needs_fence(const frpc_agent *a, const frpc_mem *m)
{
    return m->mr && !m->slot && !m->by_messages && m->access &&
           a->set.world > 1;
}

/* m's registration is closed and peers are asked (fence.c); then m is
 * unlinked, unlisted and freed. FRPC_ETIMEDOUT or FRPC_ESHUTDOWN leave m
 * linked, closed, to be deregistered again. */
static int finish_fenced(frpc_agent *a, frpc_mem *m, uint64_t deadline)
{
    int rc = fr_fence_peers(a, deadline);
    if (rc)
        return rc;
    pthread_mutex_lock(&a->mem_lock);
    unlink_locked(a, m);
    pthread_mutex_unlock(&a->mem_lock);
    atomic_fetch_sub(&a->mem_registered, 1);
    free(m);
    return 0;
}

static int deregister(frpc_agent *a, frpc_mem *m, int timeout_ms)
{
    uint64_t deadline = fr_agent_deadline(a, timeout_ms);
    int waited = 0, rc;
    if (m->fencing) /* closed by an earlier call that timed out */
        return finish_fenced(a, m, deadline);
    while (atomic_load(&m->busy) > 0) {
        waited = 1;
        if (fr_now_ns() >= deadline)
            return FRPC_ETIMEDOUT;
        if ((rc = wait_step(a)))
            return rc;
    }
    /* Emulated transfers end wholly when the shutdown fails their pieces
     * (none is in the provider's hands): the same code as native ones,
     * and mem kept for the call after frpc_shutdown, as the header says. */
    if (waited && atomic_load(&m->shut_ended))
        return FRPC_ESHUTDOWN;
    if ((rc = wait_unheld(a, m, deadline)))
        return rc;
    pthread_mutex_lock(&a->mem_lock);
    unlink_locked(a, m);
    pthread_mutex_unlock(&a->mem_lock);
    /* No peer's emulated request finds it now; one that did is copying
     * (emu_serve.c: a memcpy, or an answer that copies before it returns,
     * which may wait for room to send). Past the deadline it is linked
     * again, registered as before (peers' requests meanwhile were
     * refused, as for a region being deregistered). */
    while (atomic_load(&m->serving) > 0) {
        if (fr_now_ns() >= deadline) {
            pthread_mutex_lock(&a->mem_lock);
            link_locked(a, m);
            pthread_mutex_unlock(&a->mem_lock);
            fr_fabric_region_unseal(a->fab, m->slot, m->id);
            return FRPC_ETIMEDOUT;
        }
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
    int fence = needs_fence(a, m);
    fr_fabric_mr_close(m->mr);
    m->mr = NULL;
    fr_fabric_region_unlist(a->fab, m->slot);
    if (fence) {
        /* Linked again while peers are asked: a shutdown meanwhile must
         * find it (fr_mem_end_all). Marked before, under the lock: a
         * peer's emulated request must not find it usable again. */
        pthread_mutex_lock(&a->mem_lock);
        m->fencing = 1;
        link_locked(a, m);
        pthread_mutex_unlock(&a->mem_lock);
        return finish_fenced(a, m, deadline);
    }
    atomic_fetch_sub(&a->mem_registered, 1);
    free(m);
    return 0;
}

/* Peers' transfers that passed their check on a region of a (shm's
 * listing) may still copy: the listings sealed, they are waited for, at
 * most a second (a stopped peer's hold is not worth a longer end). */
static void wait_peers_done(frpc_agent *a)
{
    int any = 0;
    pthread_mutex_lock(&a->mem_lock);
    for (frpc_mem *m = a->mems; m; m = m->next)
        if (m->slot) {
            fr_fabric_region_seal(a->fab, m->slot);
            any = 1;
        }
    pthread_mutex_unlock(&a->mem_lock);
    uint64_t deadline = fr_deadline_ms(1000);
    while (any && fr_now_ns() < deadline) {
        any = 0;
        pthread_mutex_lock(&a->mem_lock);
        for (frpc_mem *m = a->mems; m && !any; m = m->next)
            any = fr_fabric_region_held(a->fab, m->slot);
        pthread_mutex_unlock(&a->mem_lock);
        if (any)
            fr_progress_poll_or_nap(a);
    }
}

void fr_mem_end_all(frpc_agent *a)
{
    wait_peers_done(a);
    pthread_mutex_lock(&a->mem_lock);
    while (a->mems) {
        frpc_mem *m = a->mems;
        unlink_locked(a, m);
        fr_fabric_mr_close(m->mr);
        fr_fabric_region_unlist(a->fab, m->slot);
        m->mr = NULL;
        m->agent = NULL;
    }
    pthread_mutex_unlock(&a->mem_lock);
    atomic_store(&a->mem_registered, 0);
}

/* A region whose registration is closed (fencing) has neither: 0,
 * which no peer's provider takes. */
uint64_t fr_mem_addr(const frpc_mem *m, size_t off)
{
    return m->by_messages ? (uint64_t)off
           : m->mr        ? fr_fabric_mr_addr(m->mr, off)
                          : 0;
}

uint64_t fr_mem_key(const frpc_mem *m)
{
    return m->by_messages ? m->id : m->mr ? fr_fabric_mr_key(m->mr) : 0;
}

/* The descriptors this thread verified last. A program transfers from
 * the same slices again and again, and a check value costs an
 * HMAC-SHA256: a quarter of an 8-byte get's time on shm (and the owner
 * of an emulated transfer checks each request's descriptor again). An entry is made
 * only by a descriptor that passed the check, and matches only the same
 * 64 bytes under the same job token, so nothing forged gets through. */
#define FR_DESC_CACHE 4

static _Thread_local struct {
    int used;
    uint64_t token;
    uint8_t bytes[FRPC_MEM_DESC_SIZE];
    fr_memdesc d;
} desc_cache[FR_DESC_CACHE];
static _Thread_local unsigned desc_cache_next FR_TLS_FAST;

int fr_mem_decode(const frpc_agent *a, const void *desc, size_t dlen,
                  fr_memdesc *d)
{
    if (dlen == FRPC_MEM_DESC_SIZE)
        for (unsigned i = 0; i < FR_DESC_CACHE; i++)
            if (desc_cache[i].used && desc_cache[i].token == a->token &&
                memcmp(desc_cache[i].bytes, desc, dlen) == 0) {
                *d = desc_cache[i].d;
                return 0;
            }
    int rc = fr_memdesc_decode(desc, dlen, a->token, (uint32_t)a->set.world,
                               d);
    if (rc == 0 && dlen == FRPC_MEM_DESC_SIZE) {
        unsigned i = desc_cache_next++ % FR_DESC_CACHE;
        desc_cache[i].used = 1;
        desc_cache[i].token = a->token;
        memcpy(desc_cache[i].bytes, desc, dlen);
        desc_cache[i].d = *d;
    }
    return rc;
}

int frpc_mem_describe(const frpc_mem *m, size_t offset, size_t len,
                      void *out)
{
    fr_memdesc d;
    if (!m || !out || len == 0 || offset > m->len || len > m->len - offset)
        return FRPC_EINVAL;
    if (!m->agent)
        return FRPC_ESHUTDOWN;
    d.rank = (uint32_t)m->agent->set.rank;
    d.access = (uint8_t)m->access;
    d.flags = m->by_messages ? FR_MEMDESC_F_MESSAGES : 0;
    d.slot = m->slot;
    d.addr = fr_mem_addr(m, offset);
    d.key = fr_mem_key(m);
    d.len = len;
    d.region = m->id;
    fr_memdesc_encode(&d, m->agent->token, out);
    return 0;
}

int frpc_mp_pack_mem(msgpack_packer *pk, const frpc_mem *m, size_t offset,
                     size_t len)
{
    unsigned char d[FRPC_MEM_DESC_SIZE];
    int rc;
    if (!pk)
        return FRPC_EINVAL;
    if ((rc = frpc_mem_describe(m, offset, len, d)))
        return rc;
    /* One write of the bin's header and bytes: two could leave a header
     * without its bytes in the buffer when the second failed. */
    _Static_assert(sizeof(d) <= 255, "a bin 8");
    unsigned char bin[2 + sizeof(d)] = {0xc4, (unsigned char)sizeof(d)};
    memcpy(bin + 2, d, sizeof(d));
    return pk->callback(pk->data, (const char *)bin, sizeof(bin)) ? FRPC_ENOMEM
                                                                  : 0;
}
