/*
 * Configuration: frpc_config_init and the merge of config, environment and
 * defaults into fr_settings. The order is always: an explicit config field,
 * then the environment, then the default.
 */
#include "config.h"

#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/bootenv.h"
#include "comm/store_proto.h"
#include "rpc/agent.h"

#define FR_DEFAULT_MAX_MSG (64u << 20)
#define FR_DEFAULT_INIT_TIMEOUT_MS 60000
#define FR_DEFAULT_TIMEOUT_MS 60000
#define FR_DEFAULT_PEER_TIMEOUT_MS 5000
#define FR_DEFAULT_NOTIFY_QUEUE 65536
#define FR_DEFAULT_SPIN_US 200
#define FR_DEFAULT_THREADS 4
#define FR_DEFAULT_QUEUE_LEN 1024
#define FR_DEFAULT_MAX_INFLIGHT 65536
/* Lending beats copying from the first rendezvous size up: see
 * docs/PERFORMANCE.md, "Zero-copy calls". */
#define FR_DEFAULT_ZEROCOPY_MIN 65536
#define FR_DEFAULT_SHM_SPLIT_MAX 65536 /* capped at 16 parts: 64768 B */

/* The struct's size once its last field of a release was field. */
#define FR_CONFIG_SIZE_TO(field)                                              \
    FR_ROUND_UP(offsetof(frpc_config, field) +                               \
                    sizeof(((frpc_config *)0)->field),                        \
                _Alignof(frpc_config))
#define FR_ROUND_UP(n, a) (((n) + (a) - 1) / (a) * (a))

/* The sizes frpc_config has had (1.0, 1.1, 1.2 and 1.3, 1.4): any other
 * was not made by frpc_config_init, and would cut a field in two. */
static int config_size_known(size_t size)
{
    static const size_t known[] = {
        FR_CONFIG_SIZE_TO(errbuf_len), FR_CONFIG_SIZE_TO(notify_queue),
        FR_CONFIG_SIZE_TO(rma), FR_CONFIG_SIZE_TO(fn_stats)};
    _Static_assert(FR_CONFIG_SIZE_TO(fn_stats) == sizeof(frpc_config),
                   "a release added a field: add its size here");
    /* 1.4's fn_stats took 1.2's padding on LP64: two releases, one size
     * (fabrpc.h). The next release's fields must make the size new. */
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (size == known[i])
            return 1;
    return 0;
}

static void set_unset(frpc_config *c)
{
    c->rank = c->world_size = c->strict = FRPC_UNSET;
    c->max_msg_size = FRPC_UNSET;
    c->init_timeout_ms = c->peer_timeout_ms = c->timeout_ms = FRPC_UNSET;
    c->progress = c->spin_us = c->threads = c->queue_len = FRPC_UNSET;
    c->max_inflight = c->coalesce = c->notify_queue = c->rma = FRPC_UNSET;
    c->fn_stats = FRPC_UNSET;
    c->zerocopy_min = FRPC_UNSET;
}

void frpc_config_init_sized(frpc_config *cfg, size_t size)
{
    frpc_config full;
    if (!cfg || size < sizeof(size_t) || size > FR_SIZED_MAX)
        return; /* not a size the macro passes: touch nothing */
    memset(&full, 0, sizeof(full));
    set_unset(&full);
    full.size = size < sizeof(full) ? size : sizeof(full);
    /* A program built against a newer header has fields past ours: they
     * are zero here, and frpc_init refuses a size it does not know. */
    memset(cfg, 0, size);
    memcpy(cfg, &full, full.size);
    cfg->size = size;
}

int fr_config_adopt(const frpc_config *cfg, frpc_config *full)
{
    memset(full, 0, sizeof(*full));
    set_unset(full);
    if (!cfg) {
        full->size = sizeof(*full);
        return 0;
    }
    if (!config_size_known(cfg->size))
        return FRPC_EINVAL; /* not from frpc_config_init, or from a newer
                               fabrpc's header than this library */
    memcpy(full, cfg, cfg->size); /* fields past it stay unset */
    full->size = sizeof(*full);
    return 0;
}

/* Reads variable name as an integer in [lo, hi]. Returns 0 when unset
 * (leaving *out), 1 when set, FRPC_EINVAL when malformed. */
static int env_ullong(const char *name, unsigned long long lo,
                      unsigned long long hi, unsigned long long *out,
                      char *err, size_t errlen)
{
    long v = 0;
    int found = 0;
    int rc = fr_bootenv_getenv_long(name, (long)lo, (long)hi, &v, &found, err,
                                    errlen);
    if (rc)
        return rc;
    if (found)
        *out = (unsigned long long)v;
    return found;
}

/* A numeric field: its value when set (it must lie in [lo, hi]), else
 * the variable env when set, else dflt. 0 or FRPC_EINVAL. */
static int numeric(const char *field, long long value, const char *env,
                   long long lo, long long hi, long long dflt, long long *out,
                   char *err, size_t errlen)
{
    unsigned long long x = (unsigned long long)dflt;
    int rc;
    if (value != FRPC_UNSET) {
        if (value < lo || value > hi) {
            snprintf(err, errlen, "config.%s=%lld: want %lld..%lld (or "
                     "FRPC_UNSET for the default)", field, value, lo, hi);
            return FRPC_EINVAL;
        }
        *out = value;
        return 0;
    }
    if (env && (rc = env_ullong(env, (unsigned long long)lo,
                                (unsigned long long)hi, &x, err, errlen)) < 0)
        return rc;
    *out = (long long)x;
    return 0;
}

/* A field whose values have names: its value when set (one of vals),
 * else the variable env (one of names), else dflt. what says what the
 * field is ("a progress mode"). 0 or FRPC_EINVAL. */
static int named(const char *field, int value, const char *env,
                 const char *const *names, const int *vals, int n, int dflt,
                 const char *what, int *out, char *err, size_t errlen)
{
    const char *v = getenv(env);
    if (value != FRPC_UNSET) {
        for (int i = 0; i < n; i++)
            if (value == vals[i]) {
                *out = value;
                return 0;
            }
        snprintf(err, errlen, "config.%s=%d is not %s", field, value, what);
        return FRPC_EINVAL;
    }
    *out = dflt;
    if (!v || !*v)
        return 0;
    for (int i = 0; i < n; i++)
        if (strcmp(v, names[i]) == 0) {
            *out = vals[i];
            return 0;
        }
    int w = snprintf(err, errlen, "%s=\"%.64s\": expected", env, v);
    for (int i = 0; i < n && w > 0 && (size_t)w < errlen; i++)
        w += snprintf(err + w, errlen - (size_t)w, "%s%s",
                      i == 0 ? " " : i == n - 1 ? " or " : ", ", names[i]);
    return FRPC_EINVAL;
}

static int resolve_progress(const frpc_config *cfg, fr_settings *s,
                            char *err, size_t errlen)
{
    static const char *const names[] = {"busy", "adaptive", "blocking"};
    static const int vals[] = {FRPC_PROGRESS_BUSY, FRPC_PROGRESS_ADAPTIVE,
                               FRPC_PROGRESS_BLOCKING};
    long long spin = 0;
    int mode, rc;

    if ((rc = named("progress", cfg->progress, "FABRPC_PROGRESS", names,
                    vals, 3, FRPC_PROGRESS_ADAPTIVE, "a progress mode", &mode,
                    err, errlen)))
        return rc;
    s->progress = (frpc_progress_mode)mode;
    if ((rc = numeric("spin_us", cfg->spin_us, "FABRPC_SPIN_US", 0, 10000000,
                      FR_DEFAULT_SPIN_US, &spin, err, errlen)))
        return rc;
    s->spin_us = s->progress == FRPC_PROGRESS_BLOCKING ? 0 : (unsigned)spin;
    return 0;
}

/* How one-sided transfers move bytes (rpc/emu_serve.c decides auto). */
static int resolve_rma(const frpc_config *cfg, fr_settings *s, char *err,
                       size_t errlen)
{
    static const char *const names[] = {"auto", "native", "emulate"};
    static const int vals[] = {FRPC_RMA_AUTO, FRPC_RMA_NATIVE,
                               FRPC_RMA_EMULATE};
    int mode, rc;
    if ((rc = named("rma", cfg->rma, "FABRPC_RMA", names, vals, 3,
                    FRPC_RMA_AUTO, "an RMA mode (auto, native, emulate)",
                    &mode, err, errlen)))
        return rc;
    s->rma = (frpc_rma_mode)mode;
    s->rma_from_env = cfg->rma == FRPC_UNSET && mode != FRPC_RMA_AUTO;
    return 0;
}

/* An on/off field: its value when set (0 or 1), else the variable env
 * (0 or 1), else dflt. 0 or FRPC_EINVAL. */
static int resolve_switch(const char *field, int value, const char *env,
                          int dflt, int *out, char *err, size_t errlen)
{
    long long x = 0;
    int rc = numeric(field, value, env, 0, 1, dflt, &x, err, errlen);
    *out = (int)x;
    return rc;
}

static int resolve_limits(const frpc_config *cfg, fr_settings *s, char *err,
                          size_t errlen)
{
    long long x = 0;
    int rc;

    if ((rc = numeric("max_msg_size", cfg->max_msg_size, "FABRPC_MAX_MSG", 1,
                      1ll << 40, FR_DEFAULT_MAX_MSG, &x, err, errlen)))
        return rc;
    s->max_msg = (size_t)x;
    if ((rc = numeric("threads", cfg->threads, "FABRPC_THREADS", 1, 256,
                      FR_DEFAULT_THREADS, &x, err, errlen)))
        return rc;
    s->threads = (unsigned)x;
    if ((rc = resolve_switch("coalesce", cfg->coalesce, "FABRPC_COALESCE", 1,
                             &s->coalesce, err, errlen)))
        return rc;
    if ((rc = resolve_switch("fn_stats", cfg->fn_stats, "FABRPC_FN_STATS", 1,
                             &s->fn_stats, err, errlen)))
        return rc;
    if ((rc = numeric("max_inflight", cfg->max_inflight,
                      "FABRPC_MAX_INFLIGHT", 1, 1ll << 30,
                      FR_DEFAULT_MAX_INFLIGHT, &x, err, errlen)))
        return rc;
    s->max_inflight = (unsigned)x;
    if ((rc = numeric("queue_len", cfg->queue_len, NULL, 1, 1ll << 20,
                      FR_DEFAULT_QUEUE_LEN, &x, err, errlen)))
        return rc;
    s->queue_len = (unsigned)x;
    if ((rc = numeric("notify_queue", cfg->notify_queue,
                      "FABRPC_NOTIFY_QUEUE", 1, 1ll << 24,
                      FR_DEFAULT_NOTIFY_QUEUE, &x, err, errlen)))
        return rc;
    s->notify_queue = (unsigned)x;
    if ((rc = numeric("zerocopy_min", cfg->zerocopy_min,
                      "FABRPC_ZEROCOPY_MIN", 0, 1ll << 40,
                      FR_DEFAULT_ZEROCOPY_MIN, &x, err, errlen)))
        return rc;
    s->zerocopy_min = x ? (size_t)x : SIZE_MAX;
    /* No config field: a transport detail, for measuring and for turning
     * it off should shm ever misbehave with it (0). */
    if ((rc = numeric("FABRPC_SHM_SPLIT_MAX", FRPC_UNSET,
                      "FABRPC_SHM_SPLIT_MAX", 0, 1ll << 20,
                      FR_DEFAULT_SHM_SPLIT_MAX, &x, err, errlen)))
        return rc;
    s->shm_split_max = (size_t)x;
    if ((rc = numeric("init_timeout_ms", cfg->init_timeout_ms,
                      "FABRPC_INIT_TIMEOUT_MS", 1, 86400000,
                      FR_DEFAULT_INIT_TIMEOUT_MS, &x, err, errlen)))
        return rc;
    s->init_timeout_ms = (int)x;
    return 0;
}

/* FRPC_TIMEOUT_DEFAULT's meaning: the field (milliseconds > 0, or
 * negative: no limit), else FABRPC_TIMEOUT_MS (milliseconds, or "none"),
 * else a minute. */
static int resolve_timeout(const frpc_config *cfg, fr_settings *s, char *err,
                           size_t errlen)
{
    const char *v = getenv("FABRPC_TIMEOUT_MS");
    long long x = 0;
    int rc;

    if (cfg->timeout_ms != FRPC_UNSET) {
        if (cfg->timeout_ms == 0) {
            snprintf(err, errlen, "config.timeout_ms=0: want milliseconds "
                     "> 0, FRPC_TIMEOUT_NONE, or FRPC_UNSET for the "
                     "default");
            return FRPC_EINVAL;
        }
        s->timeout_ms = cfg->timeout_ms < 0 ? FRPC_TIMEOUT_NONE
                                            : cfg->timeout_ms;
        return 0;
    }
    if (v && strcmp(v, "none") == 0) {
        s->timeout_ms = FRPC_TIMEOUT_NONE;
        return 0;
    }
    if ((rc = numeric("timeout_ms", FRPC_UNSET, "FABRPC_TIMEOUT_MS", 1,
                      INT32_MAX, FR_DEFAULT_TIMEOUT_MS, &x, err, errlen))) {
        /* The parser knows only numbers: name the other value taken. */
        snprintf(err, errlen, "FABRPC_TIMEOUT_MS=\"%.64s\": want "
                 "milliseconds 1..%d, or \"none\" for no limit", v ? v : "",
                 INT32_MAX);
        return rc;
    }
    s->timeout_ms = (int)x;
    return 0;
}

/* How soon a silent vanished host is given up: the field, else
 * FABRPC_PEER_TIMEOUT_MS, else 5 s; 4 s at the least (keepalive's
 * granularity). */
static int resolve_peer_timeout(const frpc_config *cfg, fr_settings *s,
                                char *err, size_t errlen)
{
    long long x = 0;
    int rc = numeric("peer_timeout_ms", cfg->peer_timeout_ms,
                     "FABRPC_PEER_TIMEOUT_MS", 1, 3600000,
                     FR_DEFAULT_PEER_TIMEOUT_MS, &x, err, errlen);
    if (rc)
        return rc;
    s->peer_timeout_ms = x < 4000 ? 4000 : (int)x;
    return 0;
}

/* The job's secret: the field, else FABRPC_JOB_KEY; 1..255 bytes. */
static int resolve_job_key(const frpc_config *cfg, fr_settings *s, char *err,
                           size_t errlen)
{
    const char *k = cfg->job_key ? cfg->job_key : getenv("FABRPC_JOB_KEY");
    size_t n = k ? strlen(k) : 0;
    if (cfg->job_key && n == 0) {
        snprintf(err, errlen, "config.job_key is empty");
        return FRPC_EINVAL;
    }
    if (n >= sizeof(s->job_key)) {
        snprintf(err, errlen, "the job key (%s) is %zu bytes: at most %zu",
                 cfg->job_key ? "config.job_key" : "FABRPC_JOB_KEY", n,
                 sizeof(s->job_key) - 1);
        return FRPC_EINVAL;
    }
    if (n)
        memcpy(s->job_key, k, n);
    s->job_key_len = n;
    return 0;
}

/* An empty element ("tcp,,shm", "shm,") names no provider: a typo, like
 * a misspelt name, refused rather than skipped. FI_PROVIDER is
 * libfabric's to parse and is not checked here. */
static int has_empty_element(const char *list)
{
    for (const char *p = list;; p++) {
        const char *end = strchr(p, ',');
        const char *e = end ? end : p + strlen(p);
        while (p < e && isspace((unsigned char)*p))
            p++;
        if (p == e)
            return 1;
        if (!end)
            return 0;
        p = end;
    }
}

static int resolve_providers(const frpc_config *cfg, fr_settings *s,
                             char *err, size_t errlen)
{
    const char *list = cfg->providers;
    const char *from = "config.providers";
    int rc;

    if (!list || !*list) {
        list = getenv("FABRPC_PROVIDER");
        from = "FABRPC_PROVIDER";
    }
    if (list && *list && has_empty_element(list)) {
        snprintf(err, errlen, "%s=\"%.64s\" has an empty provider name: "
                 "want names separated by single commas (\"shm,tcp\")",
                 from, list);
        return FRPC_EINVAL;
    }
    if (!list || !*list) {
        list = getenv("FI_PROVIDER"); /* libfabric's own choice wins */
        /* "^shm,udp" is libfabric's exclusion list: libfabric hides those
         * providers itself, so the automatic order picks among the rest
         * (read as a preference list it named providers libfabric had
         * just hidden, or none: "malformed provider list"). */
        if (list && *list == '^')
            list = NULL;
    }
    if (list && strlen(list) >= sizeof(s->providers)) {
        snprintf(err, errlen, "provider list too long: \"%.40s...\"", list);
        return FRPC_EINVAL;
    }
    snprintf(s->providers, sizeof(s->providers), "%s", list ? list : "");
    if ((rc = resolve_switch("strict", cfg->strict, "FABRPC_STRICT", 0,
                             &s->strict, err, errlen)))
        return rc;
    if (s->strict && !s->providers[0]) {
        /* FI_PROVIDER's list counts too (FI_PROVIDER=tcp runs strict);
         * its exclusion form "^shm" is none (see above). */
        snprintf(err, errlen,
                 "strict mode needs a provider list (config.providers, "
                 "FABRPC_PROVIDER or FI_PROVIDER; FI_PROVIDER=^... "
                 "excludes, it lists none)");
        return FRPC_EINVAL;
    }
    return 0;
}

int fr_settings_resolve(const frpc_config *cfg, fr_settings *s, char *err,
                        size_t errlen)
{
    fr_bootenv be;
    int rc;

    memset(s, 0, sizeof(*s));
    if ((cfg->rank != FRPC_UNSET && cfg->rank < 0) ||
        (cfg->world_size != FRPC_UNSET && cfg->world_size < 1)) {
        snprintf(err, errlen, "config.rank=%d, world_size=%d: want a rank "
                 ">= 0 and a size >= 1, or FRPC_UNSET (from the "
                 "environment)", cfg->rank, cfg->world_size);
        return FRPC_EINVAL;
    }
    /* The environment's resolver takes -1 for "not set by config". */
    int want_rank = cfg->rank == FRPC_UNSET ? -1 : cfg->rank;
    int want_world = cfg->world_size == FRPC_UNSET ? -1 : cfg->world_size;
    /* A world of one has no store (fabrpc.h, store_addr): an address it
     * would never use (MASTER_PORT=65535 in a one-process torchrun job,
     * MASTER_ADDR without MASTER_PORT, a typo) is not even read, so it
     * neither fails frpc_init nor leaves words in errbuf. */
    if (fr_bootenv_resolve_rank(want_rank, want_world, &be, NULL, 0) == 0 &&
        be.world_size == 1) {
        be.store_source = "none";
        rc = 0;
    } else {
        rc = fr_bootenv_resolve(want_rank, want_world, cfg->store_addr, &be,
                                err, errlen);
        if (rc && !be.rank_outside)
            return rc;
    }
    int outside = rc; /* resolve the rest too, but report this */
    char scratch[256];
    if (outside) {
        err = scratch;
        errlen = sizeof(scratch);
    }
    s->rank = be.rank;
    s->world = be.world_size;
    s->alone_by_default = strcmp(be.source, "default") == 0;
    snprintf(s->store_host, sizeof(s->store_host), "%s", be.store_host);
    s->store_port = be.store_port;
    fr_store__fmt_addr(s->store_at, sizeof(s->store_at), s->store_host,
                       s->store_port);
    s->store_source = be.store_source;
    s->rank_name = be.rank_name;
    if ((rc = resolve_progress(cfg, s, err, errlen)) ||
        (rc = resolve_limits(cfg, s, err, errlen)) ||
        (rc = resolve_providers(cfg, s, err, errlen)) ||
        (rc = resolve_timeout(cfg, s, err, errlen)) ||
        (rc = resolve_peer_timeout(cfg, s, err, errlen)) ||
        (rc = resolve_job_key(cfg, s, err, errlen)) ||
        (rc = resolve_rma(cfg, s, err, errlen)))
        return outside ? outside : rc;
    /* A world of one has no store and nobody to tell (fabrpc.h). */
    s->rank_outside = outside != 0 && be.world_size > 1;
    return outside;
}
