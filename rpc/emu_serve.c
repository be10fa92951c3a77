/*
 * One-sided transfers emulated by messages, the owner's side: fabrpc's
 * own inline functions FR_EMU_GET_NAME ("frpc.get": answers with the
 * bytes of a slice) and FR_EMU_PUT_NAME ("frpc.put": writes its args
 * into one), and the choice at init between native and emulated
 * transfers (config.rma) with its reason for frpc_backend_report.
 *
 * Design notes
 * - Everything from the wire is checked as a native transfer is, and
 *   more: the descriptor is decoded again here (format, the job-keyed
 *   check value, its rank must be this one), then its access and the
 *   slice asked for; then the region is looked up by its id among those
 *   registered now, and the descriptor's key and slice must match that
 *   region. A descriptor of a deregistered region therefore finds nothing
 *   (ids are never reused in the agent's life) and is refused with
 *   FRPC_EACCES on every provider: no memory is touched after
 *   frpc_mem_deregister returns.
 * - A region found is held (serving) while its bytes are copied or
 *   answered; frpc_mem_deregister unlinks it first (no new lookup finds
 *   it), then waits for serving to drop (within its timeout, else it
 *   links the region again). The lookup walks the agent's list
 *   of regions under mem_lock: one pass per request, over the regions this
 *   rank has registered now.
 * - The functions are inline (they run on the polling thread, as
 *   notifications do): a put's answer goes out once its bytes are in the
 *   region, so the caller's completion means what a native put's does. A
 *   get's answer copies the slice (into the reply, or the rendezvous
 *   block) before the hold ends.
 * - Every rank serves, native or not, so ranks in different modes (one
 *   whose provider refused the test registration, under auto) still work
 *   together: a descriptor says how its owner serves it
 *   (FR_MEMDESC_F_MESSAGES), and the caller emulates when either side does
 *   (transfer.c).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "comm/memdesc.h"
#include "rpc/emu.h"
#include "rpc/mem.h"

/* Finds and holds the region a request names, checked through: 0 with
 * *held (serving + 1) and *at, *len the bytes asked for; else the code,
 * with the words in why. */
static int lookup(frpc_agent *a, const uint8_t *args, size_t alen,
                  int write, frpc_mem **held, uint8_t **at, size_t *len,
                  char *why, size_t whylen)
{
    unsigned need = write ? FR_MEMDESC_WRITE : FR_MEMDESC_READ;
    fr_memdesc d;
    int rc;

    if (alen < FR_EMU_HDR) {
        snprintf(why, whylen, "emulated transfer: %zu bytes of request, "
                 "fewer than its header", alen);
        return FRPC_EPROTO;
    }
    if ((rc = fr_mem_decode(a, args, FRPC_MEM_DESC_SIZE, &d))) {
        snprintf(why, whylen, "emulated transfer: the descriptor %s",
                 rc == FRPC_EACCES ? "fails its check value"
                                   : "is malformed or names no rank");
        return rc;
    }
    uint64_t off = fr_emu_get64(args + FRPC_MEM_DESC_SIZE);
    uint64_t n = fr_emu_get64(args + FRPC_MEM_DESC_SIZE + 8);
    if (d.rank != (uint32_t)a->set.rank || !(d.access & need)) {
        snprintf(why, whylen, "emulated transfer: the descriptor %s",
                 d.rank != (uint32_t)a->set.rank ? "is another rank's"
                                                 : "does not grant it");
        return FRPC_EACCES;
    }
    if (off > d.len || n > d.len - off ||
        alen - FR_EMU_HDR != (write ? n : 0)) {
        snprintf(why, whylen, "emulated transfer: slice or length outside "
                 "the descriptor's, or args of the wrong length");
        return off > d.len || n > d.len - off ? FRPC_EINVAL : FRPC_EPROTO;
    }
    rc = FRPC_EACCES;
    pthread_mutex_lock(&a->mem_lock);
    for (frpc_mem *m = a->mems; m; m = m->next) {
        if (m->id != d.region)
            continue;
        uint64_t base = fr_mem_addr(m, 0);
        if (!m->fencing && d.key == fr_mem_key(m) && (m->access & need) &&
            d.addr >= base && d.addr - base <= m->len &&
            d.len <= m->len - (d.addr - base)) {
            atomic_fetch_add(&m->serving, 1);
            *held = m;
            *at = m->buf + (d.addr - base) + off;
            *len = (size_t)n;
            rc = 0;
        }
        break;
    }
    pthread_mutex_unlock(&a->mem_lock);
    if (rc)
        snprintf(why, whylen, "emulated transfer: rank %d has no such "
                 "region registered now (deregistered, or a stale key)",
                 a->set.rank);
    return rc;
}

static void serve(frpc_request *req, void *user, int write)
{
    frpc_agent *a = user;
    size_t alen, len = 0;
    const uint8_t *args = frpc_request_args(req, &alen);
    frpc_mem *m = NULL;
    uint8_t *at = NULL;
    char why[160];
    int rc = lookup(a, args, alen, write, &m, &at, &len, why, sizeof(why));
    if (rc) {
        fr_request_refuse(req, rc, why);
        return;
    }
    if (write) {
        if (len)
            memcpy(at, args + FR_EMU_HDR, len);
        atomic_fetch_sub(&m->serving, 1);
        frpc_respond(req, NULL, 0);
        return;
    }
    frpc_respond(req, at, len); /* copies before it returns */
    atomic_fetch_sub(&m->serving, 1);
}

static void serve_get(frpc_request *req, void *user)
{
    serve(req, user, 0);
}

static void serve_put(frpc_request *req, void *user)
{
    serve(req, user, 1);
}

int fr_emu_register(frpc_agent *a)
{
    const unsigned flags = FRPC_INLINE | FR_FUNC_UNCOUNTED;
    int rc = fr_registry_add(&a->reg, fr_func_id(FR_EMU_GET_NAME),
                             FR_EMU_GET_NAME, serve_get, a, flags);
    if (!rc)
        rc = fr_registry_add(&a->reg, fr_func_id(FR_EMU_PUT_NAME),
                             FR_EMU_PUT_NAME, serve_put, a, flags);
    return rc;
}

int fr_emu_choose(frpc_agent *a, char *err, size_t errlen)
{
    char why[160] = "";
    /* Ids start somewhere new for each agent, so that a descriptor kept
     * from an earlier agent of this process (same job token) names no
     * region of this one. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    atomic_store(&a->next_region_id,
                 ((uint64_t)ts.tv_sec << 32 ^ (uint64_t)ts.tv_nsec << 8) |
                     1u);
    a->rma_emulated = 0;
    if (a->set.rma == FRPC_RMA_EMULATE) {
        a->rma_emulated = 1;
        snprintf(a->rma_why, sizeof(a->rma_why), "forced by %s",
                 a->set.rma_from_env ? "FABRPC_RMA=emulate"
                                     : "config.rma = FRPC_RMA_EMULATE");
        return 0;
    }
    int rc = fr_fabric_rma_usable(a->fab, why, sizeof(why));
    if (rc == FRPC_ENOMEM)
        return rc;
    if (rc && a->set.rma == FRPC_RMA_NATIVE) {
        snprintf(err, errlen, "native one-sided transfers were asked for "
                 "(%s) but %s; use auto or emulate to have them emulated "
                 "by messages",
                 a->set.rma_from_env ? "FABRPC_RMA=native"
                                     : "config.rma = FRPC_RMA_NATIVE",
                 why);
        return FRPC_ENOBACKEND;
    }
    int fragile = 0;
    if (!rc && a->set.rma == FRPC_RMA_AUTO)
        fragile = fr_fabric_rma_fragile(a->fab, why, sizeof(why));
    if (rc || fragile) { /* not silently: the report says it, and stderr */
        a->rma_emulated = 1;
        snprintf(a->rma_why, sizeof(a->rma_why), "%s", why);
        fprintf(stderr, "fabrpc: rank %d: one-sided transfers are emulated "
                "by messages: %s (FABRPC_RMA=native %s)\n", a->set.rank, why,
                fragile ? "uses it anyway" : "makes this an error");
    }
    return 0;
}

int fr_emu_report(const frpc_agent *a, char *buf, size_t len)
{
    if (!a)
        return snprintf(buf, len, "%s", "");
    if (!a->rma_emulated)
        return snprintf(buf, len, "rma: native\n");
    return snprintf(buf, len, "rma: emulated (%s)\n", a->rma_why);
}
