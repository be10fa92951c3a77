/*
 * Provider discovery and choice ("backends", as NIXL's agent calls them).
 *
 * Each rank asks libfabric for every provider in its preference list and
 * records, per provider, whether it came up (usable here with the
 * capabilities fabrpc needs: RDM endpoint, messages, RMA read, thread-safe
 * domain) and, if not, why. Ranks then publish the names that came up and
 * all pick the same one with fr_backends_choose, a pure function.
 */
#ifndef FR_COMM_PROVIDERS_H
#define FR_COMM_PROVIDERS_H

#include <stddef.h>

#include <rdma/fabric.h>

#include "serialization/fabrpc_errors.h"

#define FR_BACKEND_MAX 16
#define FR_BACKEND_NAME 32

typedef struct fr_backend {
    char name[FR_BACKEND_NAME]; /* as users write it: "shm", "tcp" */
    int up;
    int unknown;                /* no libfabric provider has the name */
    char reason[320];           /* when !up: why, with what came up */
    struct fi_info *info;       /* when up: owned, the first match */
} fr_backend;

typedef struct fr_backends {
    fr_backend b[FR_BACKEND_MAX];
    int n;
    int from_user; /* the list came from the config or environment */
} fr_backends;

/* The automatic preference order when the user gives none. */
#define FR_BACKENDS_DEFAULT "shm,verbs,efa,psm3,tcp,sockets"

/*
 * Splits a comma list into short provider names: blanks are trimmed,
 * names lowered, "tcp;ofi_rxm" becomes "tcp", duplicates and "^excluded"
 * items are skipped (fr_backends_discover keeps a user's "^x" as a name,
 * unknown). Returns how many names were written (<= max), FRPC_EINVAL for
 * an empty list or a name too long, FRPC_ETOOBIG for more than max names
 * (fr_backends_discover too; frpc_init reports it as FRPC_EINVAL).
 */
int fr_backends_parse(const char *list, char names[][FR_BACKEND_NAME],
                      int max);

/*
 * Fills bs by asking libfabric about every provider in list (NULL: the
 * default order). Never fails as a whole: each provider is up or has a
 * reason. FRPC_EINVAL for a malformed list, FRPC_ENOMEM.
 */
int fr_backends_discover(fr_backends *bs, const char *list);

void fr_backends_free(fr_backends *bs);

/* The entry for name, or NULL. */
const fr_backend *fr_backends_find(const fr_backends *bs, const char *name);

/* Writes the names that came up, in order, as a comma list. Returns the
 * count. */
int fr_backends_up_list(const fr_backends *bs, char *out, size_t len);

/*
 * Strict mode: FRPC_ENOBACKEND unless every listed provider came up; errbuf
 * then names each missing provider and its reason.
 */
int fr_backends_check_strict(const fr_backends *bs, char *errbuf,
                             size_t errlen);

/*
 * Picks the provider every rank will use: the first name in order (rank
 * 0's up list) that appears in every one of the n up lists, skipping "shm"
 * unless same_host. Writes it to out and returns 0, or FRPC_ENOBACKEND
 * when no provider is common to all. Pure.
 */
int fr_backends_choose(const char *order, const char *const *up_lists,
                       int n, int same_host, char *out, size_t len);

/* One line per provider: "NAME: up", "NAME: up (active)" or
 * "NAME: not available: REASON". snprintf semantics. */
size_t fr_backends_report(const fr_backends *bs, const char *active,
                          char *buf, size_t len);

#endif /* FR_COMM_PROVIDERS_H */
