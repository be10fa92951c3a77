/*
 * Reassembly of parted frames (see parts.h). A frame in the making keeps
 * the ranges it has: parts never overlap, so when their bytes add up to
 * the whole length every byte is there.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "comm/parts.h"
#include "serialization/fabrpc_errors.h"

typedef struct partial {
    uint64_t id;
    uint64_t touched; /* the table's clock at the last part; 0: slot free */
    size_t total, got;
    unsigned n;
    struct { size_t off, len; } range[FR_PARTS_MAX];
    uint8_t *buf;
} partial;

typedef struct source {
    partial slot[FR_PARTS_PER_SOURCE];
} source;

struct fr_parts {
    pthread_mutex_t lock;
    uint32_t world;
    size_t max_frame, head;
    uint64_t clock, dropped;
    unsigned pending;
    source **src; /* allocated at a source's first part */
};

fr_parts *fr_parts_new(uint32_t world, size_t max_frame, size_t head)
{
    if (world == 0 || max_frame == 0 || head > max_frame)
        return NULL;
    fr_parts *p = calloc(1, sizeof(*p));
    if (!p || !(p->src = calloc(world, sizeof(*p->src)))) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->lock, NULL);
    p->world = world;
    p->max_frame = max_frame;
    p->head = head;
    return p;
}

static void clear(fr_parts *p, partial *pt)
{
    free(pt->buf);
    memset(pt, 0, sizeof(*pt));
    p->pending--;
}

static void drop(fr_parts *p, partial *pt)
{
    clear(p, pt);
    p->dropped++;
}

void fr_parts_free(fr_parts *p)
{
    if (!p)
        return;
    for (uint32_t s = 0; s < p->world; s++) {
        if (!p->src[s])
            continue;
        for (unsigned i = 0; i < FR_PARTS_PER_SOURCE; i++)
            free(p->src[s]->slot[i].buf);
        free(p->src[s]);
    }
    free(p->src);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* The frame id from s in the making, or NULL. */
static partial *find(source *s, uint64_t id)
{
    for (unsigned i = 0; i < FR_PARTS_PER_SOURCE; i++)
        if (s->slot[i].touched && s->slot[i].id == id)
            return &s->slot[i];
    return NULL;
}

/* A slot for a new frame: a free one, else the least recently added to,
 * whose frame is dropped. */
static partial *take_slot(fr_parts *p, source *s)
{
    partial *oldest = &s->slot[0];
    for (unsigned i = 0; i < FR_PARTS_PER_SOURCE; i++) {
        if (!s->slot[i].touched)
            return &s->slot[i];
        if (s->slot[i].touched < oldest->touched)
            oldest = &s->slot[i];
    }
    drop(p, oldest);
    return oldest;
}

static int overlaps(const partial *pt, size_t off, size_t len)
{
    for (unsigned i = 0; i < pt->n; i++)
        if (off < pt->range[i].off + pt->range[i].len &&
            pt->range[i].off < off + len)
            return 1;
    return 0;
}

/* Copies the frame's bytes [off, off + len) to their places in buf: the
 * first head bytes of the frame at its end, the rest from buf's start. */
static void place(uint8_t *buf, size_t total, size_t head, size_t off,
                  const uint8_t *bytes, size_t len)
{
    if (off < head) {
        size_t n = head - off < len ? head - off : len;
        memcpy(buf + (total - head) + off, bytes, n);
        off += n;
        bytes += n;
        len -= n;
    }
    if (len)
        memcpy(buf + (off - head), bytes, len);
}

static int add_locked(fr_parts *p, uint32_t src, uint64_t id, size_t total,
                      size_t off, const void *bytes, size_t len,
                      uint8_t **whole)
{
    if (src >= p->world)
        return FRPC_EPROTO;
    source *s = p->src[src];
    if (!s && !(s = p->src[src] = calloc(1, sizeof(*s))))
        return FRPC_ENOMEM;
    partial *pt = find(s, id);
    if (total > p->max_frame || total < p->head || off >= total ||
        len > total - off) {
        if (pt)
            drop(p, pt);
        return FRPC_EPROTO;
    }
    if (!pt) {
        pt = take_slot(p, s);
        if (!(pt->buf = malloc(total)))
            return FRPC_ENOMEM; /* the slot stays free */
        pt->id = id;
        pt->total = total;
        p->pending++;
    } else if (pt->total != total || pt->n == FR_PARTS_MAX ||
               overlaps(pt, off, len)) {
        drop(p, pt);
        return FRPC_EPROTO;
    }
    place(pt->buf, total, p->head, off, bytes, len);
    pt->range[pt->n].off = off;
    pt->range[pt->n].len = len;
    pt->n++;
    pt->got += len;
    pt->touched = ++p->clock;
    if (pt->got < pt->total)
        return 0;
    *whole = pt->buf;
    pt->buf = NULL;
    clear(p, pt);
    return 1;
}

int fr_parts_add(fr_parts *p, uint32_t src, uint64_t id, size_t total,
                 size_t off, const void *bytes, size_t len, uint8_t **whole)
{
    if (!p || !bytes || !whole || len == 0)
        return FRPC_EINVAL;
    pthread_mutex_lock(&p->lock);
    int rc = add_locked(p, src, id, total, off, bytes, len, whole);
    pthread_mutex_unlock(&p->lock);
    return rc;
}

void fr_parts_drop_source(fr_parts *p, uint32_t src)
{
    if (!p || src >= p->world)
        return;
    pthread_mutex_lock(&p->lock);
    if (p->src[src])
        for (unsigned i = 0; i < FR_PARTS_PER_SOURCE; i++)
            if (p->src[src]->slot[i].touched)
                clear(p, &p->src[src]->slot[i]);
    pthread_mutex_unlock(&p->lock);
}

uint64_t fr_parts_dropped(fr_parts *p)
{
    pthread_mutex_lock(&p->lock);
    uint64_t n = p->dropped;
    pthread_mutex_unlock(&p->lock);
    return n;
}

unsigned fr_parts_pending(fr_parts *p)
{
    pthread_mutex_lock(&p->lock);
    unsigned n = p->pending;
    pthread_mutex_unlock(&p->lock);
    return n;
}
