/*
 * Configuration: frpc_config_init and the merge of config, environment and
 * defaults into fr_settings. The order is always: an explicit config field,
 * then the environment, then the default.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/bootenv.h"
#include "rpc/agent.h"

#define FR_DEFAULT_MAX_MSG (64u << 20)
#define FR_DEFAULT_INIT_TIMEOUT_MS 60000
#define FR_DEFAULT_TIMEOUT_MS 60000
#define FR_DEFAULT_PEER_TIMEOUT_MS 5000
#define FR_DEFAULT_SPIN_US 200
#define FR_DEFAULT_THREADS 4
#define FR_DEFAULT_QUEUE_LEN 1024
#define FR_DEFAULT_MAX_INFLIGHT 65536

void frpc_config_init(frpc_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->rank = -1;
    cfg->world_size = -1;
    cfg->strict = -1;
    cfg->coalesce = -1;
    cfg->progress = FRPC_PROGRESS_ADAPTIVE;
    cfg->spin_us = FR_DEFAULT_SPIN_US;
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

/* An on/off field: cfg_value -1 means the variable env (0 or 1), else
 * dflt; any other value is taken as given (nonzero: on). 0 or
 * FRPC_EINVAL. */
static int resolve_switch(int cfg_value, const char *env, int dflt, int *out,
                          char *err, size_t errlen)
{
    unsigned long long x = (unsigned long long)dflt;
    if (cfg_value >= 0) {
        *out = cfg_value != 0;
        return 0;
    }
    int rc = env_ullong(env, 0, 1, &x, err, errlen);
    *out = (int)x;
    return rc < 0 ? rc : 0;
}

static int resolve_progress(const frpc_config *cfg, fr_settings *s,
                            char *err, size_t errlen)
{
    const char *v = getenv("FABRPC_PROGRESS");
    unsigned long long x = 0;
    int rc;

    s->progress = cfg->progress;
    s->spin_us = cfg->spin_us;
    if (cfg->progress == FRPC_PROGRESS_ADAPTIVE && v && *v) {
        if (strcmp(v, "busy") == 0)
            s->progress = FRPC_PROGRESS_BUSY;
        else if (strcmp(v, "blocking") == 0)
            s->progress = FRPC_PROGRESS_BLOCKING;
        else if (strcmp(v, "adaptive") != 0) {
            snprintf(err, errlen,
                     "FABRPC_PROGRESS=\"%s\": expected busy, adaptive or "
                     "blocking",
                     v);
            return FRPC_EINVAL;
        }
    }
    if ((unsigned)s->progress > FRPC_PROGRESS_BLOCKING) {
        snprintf(err, errlen, "config.progress=%d is not a progress mode",
                 (int)s->progress);
        return FRPC_EINVAL;
    }
    if (cfg->spin_us == FR_DEFAULT_SPIN_US) {
        if ((rc = env_ullong("FABRPC_SPIN_US", 0, 10000000, &x, err,
                             errlen)) < 0)
            return rc;
        if (rc)
            s->spin_us = (unsigned)x;
    }
    if (s->progress == FRPC_PROGRESS_BLOCKING)
        s->spin_us = 0;
    return 0;
}

static int resolve_limits(const frpc_config *cfg, fr_settings *s, char *err,
                          size_t errlen)
{
    unsigned long long x = 0;
    int rc;

    s->max_msg = cfg->max_msg_size;
    if (!s->max_msg) {
        s->max_msg = FR_DEFAULT_MAX_MSG;
        if ((rc = env_ullong("FABRPC_MAX_MSG", 1, 1ull << 40, &x, err,
                             errlen)) < 0)
            return rc;
        if (rc)
            s->max_msg = (size_t)x;
    }
    s->threads = cfg->threads;
    if (!s->threads) {
        s->threads = FR_DEFAULT_THREADS;
        if ((rc = env_ullong("FABRPC_THREADS", 1, 256, &x, err, errlen)) < 0)
            return rc;
        if (rc)
            s->threads = (unsigned)x;
    } else if (s->threads > 256) {
        snprintf(err, errlen, "config.threads=%u is over 256", cfg->threads);
        return FRPC_EINVAL;
    }
    if ((rc = resolve_switch(cfg->coalesce, "FABRPC_COALESCE", 1,
                             &s->coalesce, err, errlen)))
        return rc;
    s->max_inflight = cfg->max_inflight;
    if (!s->max_inflight) {
        s->max_inflight = FR_DEFAULT_MAX_INFLIGHT;
        if ((rc = env_ullong("FABRPC_MAX_INFLIGHT", 1, 1u << 30, &x, err,
                             errlen)) < 0)
            return rc;
        if (rc)
            s->max_inflight = (unsigned)x;
    }
    s->queue_len = cfg->queue_len ? cfg->queue_len : FR_DEFAULT_QUEUE_LEN;
    if (s->queue_len > (1u << 20)) {
        snprintf(err, errlen, "config.queue_len=%u is over %u",
                 cfg->queue_len, 1u << 20);
        return FRPC_EINVAL;
    }
    s->init_timeout_ms = cfg->init_timeout_ms;
    if (s->init_timeout_ms < 0) {
        snprintf(err, errlen, "config.init_timeout_ms=%d is negative",
                 cfg->init_timeout_ms);
        return FRPC_EINVAL;
    }
    if (!s->init_timeout_ms) {
        s->init_timeout_ms = FR_DEFAULT_INIT_TIMEOUT_MS;
        if ((rc = env_ullong("FABRPC_INIT_TIMEOUT_MS", 1, 86400000, &x, err,
                             errlen)) < 0)
            return rc;
        if (rc)
            s->init_timeout_ms = (int)x;
    }
    return 0;
}

/* FRPC_TIMEOUT_DEFAULT's meaning: the field, else FABRPC_TIMEOUT_MS
 * (milliseconds, or "none"), else a minute. */
static int resolve_timeout(const frpc_config *cfg, fr_settings *s, char *err,
                           size_t errlen)
{
    unsigned long long x = 0;
    const char *v = getenv("FABRPC_TIMEOUT_MS");
    int rc;

    if (cfg->timeout_ms) {
        s->timeout_ms = cfg->timeout_ms < 0 ? FRPC_TIMEOUT_NONE
                                            : cfg->timeout_ms;
        return 0;
    }
    s->timeout_ms = FR_DEFAULT_TIMEOUT_MS;
    if (v && strcmp(v, "none") == 0) {
        s->timeout_ms = FRPC_TIMEOUT_NONE;
        return 0;
    }
    if ((rc = env_ullong("FABRPC_TIMEOUT_MS", 1, INT32_MAX, &x, err,
                         errlen)) < 0)
        return rc;
    if (rc)
        s->timeout_ms = (int)x;
    return 0;
}

/* How soon a silent vanished host is given up: the field, else
 * FABRPC_PEER_TIMEOUT_MS, else 5 s; 4 s at the least (keepalive's
 * granularity). */
static int resolve_peer_timeout(const frpc_config *cfg, fr_settings *s,
                                char *err, size_t errlen)
{
    unsigned long long x = FR_DEFAULT_PEER_TIMEOUT_MS;
    int rc = 0;
    if (cfg->peer_timeout_ms < 0) {
        snprintf(err, errlen, "config.peer_timeout_ms=%d is negative",
                 cfg->peer_timeout_ms);
        return FRPC_EINVAL;
    }
    if (cfg->peer_timeout_ms)
        x = (unsigned long long)cfg->peer_timeout_ms;
    else if ((rc = env_ullong("FABRPC_PEER_TIMEOUT_MS", 1, 3600000, &x, err,
                              errlen)) < 0)
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

static int resolve_providers(const frpc_config *cfg, fr_settings *s,
                             char *err, size_t errlen)
{
    const char *list = cfg->providers;
    int rc;

    if (!list || !*list)
        list = getenv("FABRPC_PROVIDER");
    if (!list || !*list)
        list = getenv("FI_PROVIDER"); /* libfabric's own choice wins */
    if (list && strlen(list) >= sizeof(s->providers)) {
        snprintf(err, errlen, "provider list too long: \"%.40s...\"", list);
        return FRPC_EINVAL;
    }
    snprintf(s->providers, sizeof(s->providers), "%s", list ? list : "");
    if ((rc = resolve_switch(cfg->strict, "FABRPC_STRICT", 0, &s->strict,
                             err, errlen)))
        return rc;
    if (s->strict && !s->providers[0]) {
        snprintf(err, errlen,
                 "strict mode needs a provider list (config.providers or "
                 "FABRPC_PROVIDER)");
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
    rc = fr_bootenv_resolve(cfg->rank, cfg->world_size, cfg->store_addr, &be,
                            err, errlen);
    if (rc)
        return rc;
    s->rank = be.rank;
    s->world = be.world_size;
    snprintf(s->store_host, sizeof(s->store_host), "%s", be.store_host);
    s->store_port = be.store_port;
    if ((rc = resolve_progress(cfg, s, err, errlen)) ||
        (rc = resolve_limits(cfg, s, err, errlen)) ||
        (rc = resolve_providers(cfg, s, err, errlen)) ||
        (rc = resolve_timeout(cfg, s, err, errlen)) ||
        (rc = resolve_peer_timeout(cfg, s, err, errlen)) ||
        (rc = resolve_job_key(cfg, s, err, errlen)))
        return rc;
    return 0;
}
