/*
 * The function registry. See registry.h. Lookups take no lock; the table
 * grows by doubling when it is more than half full, into a new table
 * published whole (the old one stays for readers still in it).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "rpc/registry.h"

static fr_func_table *table_new(unsigned nbuckets)
{
    fr_func_table *t =
        calloc(1, sizeof(*t) + nbuckets * sizeof(t->bucket[0]));
    if (t)
        t->nbuckets = nbuckets;
    return t;
}

static void table_free(fr_func_table *t)
{
    for (unsigned i = 0; i < t->nbuckets; i++) {
        fr_func_link *l = atomic_load_explicit(&t->bucket[i],
                                               memory_order_relaxed);
        while (l) {
            fr_func_link *next = l->next;
            free(l);
            l = next;
        }
    }
    free(t);
}

int fr_registry_init(fr_registry *r)
{
    memset(r, 0, sizeof(*r));
    fr_func_table *t = table_new(64);
    if (!t)
        return FRPC_ENOMEM;
    atomic_init(&r->table, t);
    pthread_mutex_init(&r->lock, NULL);
    return 0;
}

void fr_registry_destroy(fr_registry *r)
{
    fr_func_table *t = atomic_load(&r->table);
    if (!t)
        return;
    while (t) {
        fr_func_table *older = t->older;
        table_free(t);
        t = older;
    }
    atomic_store(&r->table, NULL);
    while (r->all) {
        fr_func *next = r->all->next;
        free(r->all);
        r->all = next;
    }
    pthread_mutex_destroy(&r->lock);
}

static fr_func *find_in(fr_func_table *t, uint64_t id)
{
    fr_func_link *l = atomic_load_explicit(&t->bucket[id & (t->nbuckets - 1)],
                                           memory_order_acquire);
    for (; l; l = l->next)
        if (l->func->id == id)
            return l->func;
    return NULL;
}

static int name_taken_locked(fr_registry *r, const char *name)
{
    for (fr_func *f = r->all; f; f = f->next)
        if (strcmp(f->name, name) == 0)
            return 1;
    return 0;
}

/* Links f into t's bucket; readers see the new head only once complete. */
static int link_into(fr_func_table *t, fr_func *f)
{
    fr_func_link *l = malloc(sizeof(*l));
    if (!l)
        return FRPC_ENOMEM;
    _Atomic(fr_func_link *) *b = &t->bucket[f->id & (t->nbuckets - 1)];
    l->func = f;
    l->next = atomic_load_explicit(b, memory_order_relaxed);
    atomic_store_explicit(b, l, memory_order_release);
    return 0;
}

/* A table twice the size holding every entry, published in one store. */
static void grow_locked(fr_registry *r)
{
    fr_func_table *old = atomic_load(&r->table);
    fr_func_table *t = table_new(old->nbuckets * 2);
    if (!t)
        return; /* chains just get longer */
    for (fr_func *f = r->all; f; f = f->next)
        if (link_into(t, f)) {
            table_free(t);
            return;
        }
    t->older = old;
    atomic_store_explicit(&r->table, t, memory_order_release);
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
    atomic_init(&f->slow, 0);
    atomic_init(&f->slow_marks, 0);
    atomic_init(&f->pool_quick, 0);
    f->p_heavy = 0;
    memcpy(f->name, name, len + 1);
    pthread_mutex_lock(&r->lock);
    fr_func_table *t = atomic_load(&r->table);
    if (find_in(t, id) || name_taken_locked(r, name)) {
        rc = FRPC_EEXIST;
    } else {
        if (r->count + 1 > t->nbuckets / 2) {
            grow_locked(r);
            t = atomic_load(&r->table);
        }
        rc = link_into(t, f);
        if (!rc) {
            f->next = r->all;
            r->all = f;
            r->count++;
        }
    }
    pthread_mutex_unlock(&r->lock);
    if (rc)
        free(f);
    return rc;
}

const fr_func *fr_registry_find(fr_registry *r, uint64_t id)
{
    return find_in(atomic_load_explicit(&r->table, memory_order_acquire),
                   id);
}
