/*
 * The function registry. See registry.h. Lookups take a read lock; the
 * table grows by doubling when it is more than half full.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "rpc/registry.h"

int fr_registry_init(fr_registry *r)
{
    memset(r, 0, sizeof(*r));
    r->nbuckets = 64;
    r->bucket = calloc(r->nbuckets, sizeof(*r->bucket));
    if (!r->bucket)
        return FRPC_ENOMEM;
    pthread_rwlock_init(&r->lock, NULL);
    return 0;
}

void fr_registry_destroy(fr_registry *r)
{
    if (!r->bucket)
        return;
    for (unsigned i = 0; i < r->nbuckets; i++) {
        fr_func *f = r->bucket[i];
        while (f) {
            fr_func *next = f->next;
            free(f);
            f = next;
        }
    }
    free(r->bucket);
    r->bucket = NULL;
    pthread_rwlock_destroy(&r->lock);
}

static fr_func *find_locked(fr_registry *r, uint64_t id)
{
    for (fr_func *f = r->bucket[id & (r->nbuckets - 1)]; f; f = f->next)
        if (f->id == id)
            return f;
    return NULL;
}

static int name_taken_locked(fr_registry *r, const char *name)
{
    for (unsigned i = 0; i < r->nbuckets; i++)
        for (fr_func *f = r->bucket[i]; f; f = f->next)
            if (strcmp(f->name, name) == 0)
                return 1;
    return 0;
}

static void grow_locked(fr_registry *r)
{
    unsigned n = r->nbuckets * 2;
    fr_func **b = calloc(n, sizeof(*b));
    if (!b)
        return; /* chains just get longer */
    for (unsigned i = 0; i < r->nbuckets; i++) {
        fr_func *f = r->bucket[i];
        while (f) {
            fr_func *next = f->next;
            f->next = b[f->id & (n - 1)];
            b[f->id & (n - 1)] = f;
            f = next;
        }
    }
    free(r->bucket);
    r->bucket = b;
    r->nbuckets = n;
}

int fr_registry_add(fr_registry *r, uint64_t id, const char *name,
                    frpc_handler_fn handler, void *user, unsigned flags)
{
    size_t len = name ? strlen(name) : 0;
    fr_func *f;
    int rc = 0;

    if (!r || !handler || id == 0 || len == 0 || len > FR_FUNC_NAME_MAX)
        return FRPC_EINVAL;
    f = malloc(sizeof(*f) + len + 1);
    if (!f)
        return FRPC_ENOMEM;
    f->id = id;
    f->handler = handler;
    f->user = user;
    f->flags = flags;
    memcpy(f->name, name, len + 1);
    pthread_rwlock_wrlock(&r->lock);
    if (find_locked(r, id) || name_taken_locked(r, name)) {
        rc = FRPC_EEXIST;
    } else {
        if (r->count + 1 > r->nbuckets / 2)
            grow_locked(r);
        f->next = r->bucket[id & (r->nbuckets - 1)];
        r->bucket[id & (r->nbuckets - 1)] = f;
        r->count++;
    }
    pthread_rwlock_unlock(&r->lock);
    if (rc)
        free(f);
    return rc;
}

const fr_func *fr_registry_find(fr_registry *r, uint64_t id)
{
    const fr_func *f;
    pthread_rwlock_rdlock(&r->lock);
    f = find_locked(r, id);
    pthread_rwlock_unlock(&r->lock);
    return f;
}
