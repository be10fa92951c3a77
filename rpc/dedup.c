/*
 * Requests taken once per source and id (dedup.h). Per source, a ring of
 * FR_DEDUP_WINDOW bits indexed by id modulo the window, and the highest
 * id seen: moving the highest clears the bits of the ids it passes, so
 * each id costs O(1) whatever order they come in.
 */
#include "config.h"

#include <stdlib.h>

#include "rpc/dedup.h"
#include "serialization/fabrpc_errors.h"

struct fr_dedup_src {
    uint64_t top; /* highest id seen; 0: none yet */
    uint64_t bits[FR_DEDUP_WINDOW / 64];
};

int fr_dedup_init(fr_dedup *d, uint32_t world)
{
    d->world = world;
    d->src = calloc(world ? world : 1, sizeof(*d->src));
    if (!d->src)
        return FRPC_ENOMEM;
    pthread_mutex_init(&d->lock, NULL);
    return 0;
}

static void set_bit(fr_dedup_src *s, uint64_t id, int on)
{
    uint64_t i = id % FR_DEDUP_WINDOW, m = 1ull << (i % 64);
    if (on)
        s->bits[i / 64] |= m;
    else
        s->bits[i / 64] &= ~m;
}

static int bit(const fr_dedup_src *s, uint64_t id)
{
    uint64_t i = id % FR_DEDUP_WINDOW;
    return (s->bits[i / 64] >> (i % 64)) & 1;
}

int fr_dedup_seen(fr_dedup *d, uint32_t src, uint64_t id)
{
    int seen = 0;
    if (!d->src || src >= d->world)
        return 0;
    pthread_mutex_lock(&d->lock);
    fr_dedup_src *s = d->src[src];
    if (!s && !(s = d->src[src] = calloc(1, sizeof(*s)))) {
        pthread_mutex_unlock(&d->lock);
        return 0;
    }
    if (id > s->top) {
        if (id - s->top >= FR_DEDUP_WINDOW) {
            for (size_t i = 0; i < FR_DEDUP_WINDOW / 64; i++)
                s->bits[i] = 0;
        } else {
            for (uint64_t x = s->top + 1; x < id; x++)
                set_bit(s, x, 0);
        }
        s->top = id;
        set_bit(s, id, 1);
    } else if (s->top - id >= FR_DEDUP_WINDOW || bit(s, id)) {
        seen = 1;
    } else {
        set_bit(s, id, 1);
    }
    pthread_mutex_unlock(&d->lock);
    return seen;
}

void fr_dedup_destroy(fr_dedup *d)
{
    if (!d->src)
        return;
    for (uint32_t r = 0; r < d->world; r++)
        free(d->src[r]);
    free(d->src);
    d->src = NULL;
    pthread_mutex_destroy(&d->lock);
}
