/*
 * The function registry: name -> 64-bit id -> handler. Entries are added,
 * never removed, so a looked-up entry stays valid for the registry's life.
 * Ids are fr_func_id(name); a second name with the same id is refused, so
 * an id on the wire names exactly one function.
 */
#ifndef FR_RPC_REGISTRY_H
#define FR_RPC_REGISTRY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "rpc/fabrpc.h"

#define FR_FUNC_NAME_MAX 255

/* fr_func.flags beside FRPC_INLINE, for fabrpc's own functions only
 * (frpc_register refuses other bits): its requests get no per-function
 * figures (the emulation's: one-sided transfers are not calls there). */
#define FR_FUNC_UNCOUNTED 0x100u

typedef struct fr_func {
    struct fr_func *next; /* the registry's list of all entries */
    uint64_t id;
    frpc_handler_fn handler;
    void *user;
    unsigned flags;
    /* Its handler ran long on the progress thread (standin.h): its
     * requests go to the pool, until enough quick runs there clear it
     * (fr_standin_pool_ran). */
    atomic_int slow;
    /* How many times it went slow; its quick runs on the pool in a row
     * since (standin.c; pool threads write them, only while slow). */
    atomic_uint slow_marks, pool_quick;
    /* The progress thread's own tally (standin.c; no other thread
     * touches it): its timed runs in a row there that took
     * FR_STANDIN_HEAVY_NS or more. */
    unsigned p_heavy;
    char name[]; /* NUL-terminated */
} fr_func;

/* One generation of the lookup table: immutable once published, except
 * that a bucket's head may be replaced by a new entry pointing at it. */
typedef struct fr_func_table {
    struct fr_func_table *older; /* kept until destroy: readers may be in it */
    unsigned nbuckets;           /* power of two */
    _Atomic(struct fr_func_link *) bucket[];
} fr_func_table;

typedef struct fr_func_link {
    struct fr_func_link *next;
    fr_func *func;
} fr_func_link;

typedef struct fr_registry {
    pthread_mutex_t lock;              /* writers only */
    _Atomic(fr_func_table *) table;    /* lookups read it without a lock */
    fr_func *all;                      /* every entry, for destroy */
    unsigned count;
} fr_registry;

/* FRPC_ENOMEM or 0. */
int fr_registry_init(fr_registry *r);
void fr_registry_destroy(fr_registry *r);

/*
 * Adds name with the given id (callers pass fr_func_id(name); tests force
 * collisions). Errors: FRPC_EINVAL (name empty or longer than
 * FR_FUNC_NAME_MAX, handler NULL, id 0), FRPC_EEXIST (name or id taken),
 * FRPC_ENOMEM. Any thread.
 */
int fr_registry_add(fr_registry *r, uint64_t id, const char *name,
                    frpc_handler_fn handler, void *user, unsigned flags);

/* The entry for id, or NULL. The pointer stays valid until destroy. */
const fr_func *fr_registry_find(fr_registry *r, uint64_t id);

#endif /* FR_RPC_REGISTRY_H */
