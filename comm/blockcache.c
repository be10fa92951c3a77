/*
 * A small cache of rendezvous blocks. Large payloads would otherwise cost
 * a fresh malloc (an mmap above glibc's threshold), page faults on every
 * page the copy or the RMA read touches, and, on the sending side, a
 * memory registration, per message: measured, page faults took most of
 * the time with four 1 MiB calls in flight. Blocks are kept by size class
 * (a power of two), FR_BLOCK_CACHE_SLOTS of them and at most
 * FR_BLOCK_CACHE_BYTES in all; anything else is freed at once. The bytes
 * are the bound: 32 slots hold 128 MiB of 4 MiB blocks, which 4 emulated
 * transfers in flight need (16 pieces of 4 MiB, at each end); with 8
 * slots they ran on fresh memory, 0.4-0.6 GB/s over tcp against 2.5-3.5.
 * A block unused for FR_BLOCK_IDLE_NS is freed (fr_fabric_trim_blocks,
 * from the polling thread's idle polls): after a burst of large transfers
 * the two caches held up to 256 MiB a rank, registered, for good.
 */
#include "config.h"

#include <stdlib.h>
#ifdef HAVE_MALLOC_TRIM
#include <malloc.h>
#endif

#include "comm/clock.h"

#include "comm/fabric_internal.h"

#define FR_BLOCK_MIN_CLASS (64u << 10)
#define FR_BLOCK_CACHE_BYTES (128u << 20)
/* Rarely enough that a job moving large payloads every few seconds (a
 * training step) keeps its blocks; the check itself at most once a
 * second. */
#define FR_BLOCK_TRIM_EVERY_NS 1000000000ull

size_t fr__block_class(size_t len)
{
    size_t c = FR_BLOCK_MIN_CLASS;
    while (c < len && c < ((size_t)1 << 62))
        c <<= 1;
    return c;
}

void fr__block_cache_init(fr_block_cache *c, uint64_t access)
{
    pthread_mutex_init(&c->lock, NULL);
    c->n = 0;
    atomic_init(&c->bytes, 0);
    c->access = access;
}

static void block_free(fr_block *b)
{
    if (b->mr)
        fi_close(&b->mr->fid);
    free(b->buf);
    b->buf = NULL;
    b->mr = NULL;
}

int fr__block_get_cached(fr_block_cache *c, size_t len, fr_block *out)
{
    size_t cap = fr__block_class(len);

    pthread_mutex_lock(&c->lock);
    for (unsigned i = 0; i < c->n; i++) {
        if (c->slot[i].cap == cap) {
            *out = c->slot[i];
            c->slot[i] = c->slot[--c->n];
            atomic_fetch_sub_explicit(&c->bytes, cap, memory_order_relaxed);
            pthread_mutex_unlock(&c->lock);
            return 0;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return FRPC_ENOMEM;
}

int fr__block_alloc(fr_fabric *f, fr_block_cache *c, size_t len,
                    fr_block *out)
{
    size_t cap = fr__block_class(len);
    int rc = 0;

    out->cap = cap;
    out->mr = NULL;
    if (!(out->buf = malloc(cap)))
        return FRPC_ENOMEM;
    if (c->access && (rc = fr__reg_block(f, out->buf, cap, c->access,
                                         &out->mr)))
        block_free(out);
    return rc;
}

int fr__block_get(fr_fabric *f, fr_block_cache *c, size_t len, fr_block *out)
{
    return fr__block_get_cached(c, len, out) == 0
               ? 0
               : fr__block_alloc(f, c, len, out);
}

void fr__block_put(fr_block_cache *c, fr_block *b)
{
    pthread_mutex_lock(&c->lock);
    size_t bytes = atomic_load_explicit(&c->bytes, memory_order_relaxed);
    if (c->n < FR_BLOCK_CACHE_SLOTS && bytes + b->cap <= FR_BLOCK_CACHE_BYTES) {
        b->idle_since = fr_coarse_now_ns();
        c->slot[c->n++] = *b;
        atomic_store_explicit(&c->bytes, bytes + b->cap, memory_order_relaxed);
        b = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    if (b)
        block_free(b);
}

unsigned fr__block_cache_trim(fr_block_cache *c, uint64_t idle_before)
{
    fr_block gone[FR_BLOCK_CACHE_SLOTS];
    unsigned ngone = 0;

    pthread_mutex_lock(&c->lock);
    for (unsigned i = 0; i < c->n;) {
        if (c->slot[i].idle_since < idle_before) {
            atomic_fetch_sub_explicit(&c->bytes, c->slot[i].cap,
                                      memory_order_relaxed);
            gone[ngone++] = c->slot[i];
            c->slot[i] = c->slot[--c->n];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&c->lock);
    /* outside the lock: a deregistration and a munmap are slow */
    for (unsigned i = 0; i < ngone; i++)
        block_free(&gone[i]);
    return ngone;
}

size_t fr__block_cache_bytes(const fr_block_cache *c)
{
    return atomic_load_explicit(&c->bytes, memory_order_relaxed);
}

void fr_fabric_trim_blocks(fr_fabric *f, uint64_t now)
{
    uint64_t last = atomic_load_explicit(&f->blocks_trimmed_at,
                                         memory_order_relaxed);
    if (now - last < FR_BLOCK_TRIM_EVERY_NS || now < FR_BLOCK_IDLE_NS)
        return;
    atomic_store_explicit(&f->blocks_trimmed_at, now, memory_order_relaxed);
    unsigned n = fr__block_cache_trim(&f->out_cache, now - FR_BLOCK_IDLE_NS) +
                 fr__block_cache_trim(&f->in_cache, now - FR_BLOCK_IDLE_NS);
    if (!n)
        return;
    atomic_fetch_add(&f->st.blocks_trimmed, n);
#ifdef HAVE_MALLOC_TRIM
    /* Blocks under glibc's mmap threshold, which rises to 32 MiB once a
     * large block is freed, sit in its heap, and free() keeps their pages:
     * 130 MiB of a rank's stayed after 16 MiB calls had ended. */
    malloc_trim(0);
#endif
}

void fr__block_cache_destroy(fr_block_cache *c)
{
    for (unsigned i = 0; i < c->n; i++)
        block_free(&c->slot[i]);
    c->n = 0;
    pthread_mutex_destroy(&c->lock);
}
