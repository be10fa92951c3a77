/*
 * Bootstrap store, the key table (interface in store_proto.h): string keys
 * to byte values in a chained hash table of NBUCKETS buckets, and the
 * decimal counters kept in those values. No I/O and no locking: only the
 * server thread uses it. Nothing is ever deleted; a job has a few thousand
 * keys at most.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "comm/store_proto.h"

#define NBUCKETS 1024u

struct entry {
    struct entry *next;
    uint32_t hash;
    size_t len;
    uint8_t *val; /* malloc'ed, never NULL */
    char key[];   /* NUL-terminated */
};

struct fr_store_table {
    struct entry *buckets[NBUCKETS];
};

static uint32_t hash_key(const char *k)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *k; k++)
        h = (h ^ (uint8_t)*k) * 16777619u;
    return h;
}

static struct entry *find(const fr_store_table *t, const char *key)
{
    uint32_t h = hash_key(key);
    for (struct entry *e = t->buckets[h % NBUCKETS]; e; e = e->next)
        if (e->hash == h && strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

fr_store_table *fr_store_table_new(void)
{
    return calloc(1, sizeof(fr_store_table));
}

void fr_store_table_free(fr_store_table *t)
{
    for (size_t i = 0; t && i < NBUCKETS; i++) {
        struct entry *e = t->buckets[i], *next;
        for (; e; e = next) {
            next = e->next;
            free(e->val);
            free(e);
        }
    }
    free(t);
}

bool fr_store_table_get(const fr_store_table *t, const char *key,
                        const uint8_t **val, size_t *len)
{
    const struct entry *e = find(t, key);
    if (e) {
        *val = e->val;
        *len = e->len;
    }
    return e != NULL;
}

int fr_store_table_set(fr_store_table *t, const char *key, const void *val,
                       size_t len)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        return FRPC_ENOMEM;
    if (len)
        memcpy(copy, val, len);
    struct entry *e = find(t, key);
    if (!e) {
        size_t klen = strlen(key);
        e = malloc(sizeof(*e) + klen + 1);
        if (!e) {
            free(copy);
            return FRPC_ENOMEM;
        }
        memcpy(e->key, key, klen + 1);
        e->hash = hash_key(key);
        e->val = NULL;
        e->next = t->buckets[e->hash % NBUCKETS];
        t->buckets[e->hash % NBUCKETS] = e;
    }
    free(e->val);
    e->val = copy;
    e->len = len;
    return 0;
}

int fr_store_table_counter(const fr_store_table *t, const char *key,
                           int64_t *v)
{
    const struct entry *e = find(t, key);
    char buf[24], *end;
    *v = 0;
    if (!e)
        return 0;
    if (e->len == 0 || e->len >= sizeof(buf))
        return FRPC_EPROTO;
    memcpy(buf, e->val, e->len);
    buf[e->len] = '\0';
    const char *d = buf[0] == '-' ? buf + 1 : buf;
    if (*d < '0' || *d > '9')
        return FRPC_EPROTO;
    errno = 0;
    long long x = strtoll(buf, &end, 10);
    if (errno || end != buf + e->len)
        return FRPC_EPROTO;
    *v = x;
    return 0;
}

int fr_store_table_add(fr_store_table *t, const char *key, int64_t delta,
                       int64_t *result)
{
    int64_t v;
    char txt[24];
    int rc = fr_store_table_counter(t, key, &v);
    if (rc != 0)
        return rc;
    if (__builtin_add_overflow(v, delta, &v))
        return FRPC_EINVAL;
    snprintf(txt, sizeof(txt), "%" PRId64, v);
    rc = fr_store_table_set(t, key, txt, strlen(txt));
    if (rc == 0)
        *result = v;
    return rc;
}
