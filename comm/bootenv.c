/*
 * Rank, world size and store address from the config or the environment;
 * the rules are in bootenv.h. Every source is read as text and goes through
 * the same strict parsers, so a config value and an environment variable
 * are checked, and their errors worded, alike.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/bootenv.h"

#define ERR(...) \
    ((errbuf && errlen) ? (void)snprintf(errbuf, errlen, __VA_ARGS__) : (void)0)

/* world_alt: read when world is unset (older Slurm, and sbatch scripts
 * without -n, set SLURM_NPROCS but not SLURM_NTASKS). */
static const struct {
    const char *rank, *world, *world_alt, *source;
} env_pairs[] = {
    {"FABRPC_RANK", "FABRPC_WORLD_SIZE", NULL, "FABRPC"},
    {"RANK", "WORLD_SIZE", NULL, "torchrun"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", NULL, "mpirun"},
    {"PMI_RANK", "PMI_SIZE", NULL, "pmi"},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", "slurm"},
};

/* The variable's value, or NULL when it is unset or empty. */
static const char *env_text(const char *name)
{
    const char *v = getenv(name);
    return (v && *v) ? v : NULL;
}

int fr_bootenv_parse_long(const char *name, const char *text, long lo,
                          long hi, long *out, char *errbuf, size_t errlen)
{
    const char *p = text ? text : "";
    bool neg = *p == '-', overflow = false;
    long v = 0;
    if (neg)
        p++;
    if (*p == '\0')
        goto not_number;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            goto not_number;
        long d = *p - '0';
        overflow = overflow || __builtin_mul_overflow(v, 10, &v) ||
                   __builtin_add_overflow(v, neg ? -d : d, &v);
    }
    if (overflow || v < lo || v > hi) {
        ERR("%s=%.64s is out of range (%ld..%ld)", name, text, lo, hi);
        return FRPC_EINVAL;
    }
    *out = v;
    return 0;
not_number:
    ERR("%s='%.64s' is not a decimal integer", name, text ? text : "");
    return FRPC_EINVAL;
}

int fr_bootenv_getenv_long(const char *name, long lo, long hi, long *out,
                           int *found, char *errbuf, size_t errlen)
{
    const char *t = env_text(name);
    *found = t != NULL;
    return t ? fr_bootenv_parse_long(name, t, lo, hi, out, errbuf, errlen) : 0;
}

/* What a host name (or an IPv4 address, or an IPv6 zone) is made of. */
#define NAME_CHARS \
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"

static bool is_name(const char *s)
{
    return *s && s[strspn(s, NAME_CHARS)] == '\0';
}

/* 1 if host can name a host: a name or an IPv4 address, or an IPv6
 * address with an optional "%zone". Anything else ("127.0.0.1:5",
 * " node1", "[::1") would only fail name resolution, at every try until
 * the init timeout. */
static bool host_syntax_ok(const char *host)
{
    if (!strchr(host, ':'))
        return is_name(host);
    char addr[INET6_ADDRSTRLEN + 1];
    struct in6_addr a6;
    size_t n = strcspn(host, "%");
    if (n >= sizeof(addr) || (host[n] && !is_name(host + n + 1)))
        return false;
    memcpy(addr, host, n);
    addr[n] = '\0';
    return inet_pton(AF_INET6, addr, &a6) == 1;
}

/* Copies len bytes of text at h into host as a C string. */
static int copy_host(const char *name, const char *text, const char *h,
                     size_t len, char *host, size_t hostlen, char *errbuf,
                     size_t errlen)
{
    if (len == 0 || len >= hostlen || memchr(h, '\0', len)) {
        ERR("%s='%.64s': the host is empty or longer than %zu bytes", name,
            text, hostlen ? hostlen - 1 : 0);
        return FRPC_EINVAL;
    }
    memcpy(host, h, len);
    host[len] = '\0';
    if (!host_syntax_ok(host)) {
        ERR("%s='%.64s': '%.64s' is neither a host name nor an IP address",
            name, text, host);
        return FRPC_EINVAL;
    }
    return 0;
}

static int parse_port(const char *name, const char *text, uint16_t *port,
                      char *errbuf, size_t errlen)
{
    long v;
    int rc = fr_bootenv_parse_long(name, text, 1, 65535, &v, errbuf, errlen);
    if (rc == 0)
        *port = (uint16_t)v;
    return rc;
}

int fr_bootenv_parse_addr(const char *name, const char *text, char *host,
                          size_t hostlen, uint16_t *port, char *errbuf,
                          size_t errlen)
{
    const char *h = text ? text : "", *end, *portstr;
    if (*h == '[') {
        h++;
        end = strchr(h, ']');
        if (!end || end[1] != ':')
            goto bad;
        portstr = end + 2;
    } else {
        end = strrchr(h, ':');
        if (end && memchr(h, ':', (size_t)(end - h))) {
            ERR("%s='%.64s' is not host:port or [v6addr]:port (an IPv6 "
                "address needs brackets)", name, h);
            return FRPC_EINVAL;
        }
        if (!end || strpbrk(h, "[]"))
            goto bad;
        portstr = end + 1;
    }
    if (*portstr == '\0')
        goto bad;
    char label[96];
    snprintf(label, sizeof(label), "%s port", name);
    int rc = copy_host(name, text, h, (size_t)(end - h), host, hostlen, errbuf,
                       errlen);
    return rc ? rc : parse_port(label, portstr, port, errbuf, errlen);
bad:
    ERR("%s='%.64s' is not host:port or [v6addr]:port", name, text ? text : "");
    return FRPC_EINVAL;
}

/*
 * One source of rank and world size, given as text (NULL: unset). Sets
 * *found when the pair is set, and then out->rank/world_size.
 */
static int take_pair(const char *rname, const char *rtext, const char *wname,
                     const char *wtext, fr_bootenv *out, bool *found,
                     char *errbuf, size_t errlen)
{
    long r, w;
    *found = rtext || wtext;
    if (!*found)
        return 0;
    if (!rtext || !wtext) {
        ERR("%s=%.64s is set but %s is not", rtext ? rname : wname,
            rtext ? rtext : wtext, rtext ? wname : rname);
        return FRPC_EINVAL;
    }
    int rc = fr_bootenv_parse_long(rname, rtext, 0, FR_BOOTENV_MAX_WORLD - 1,
                                   &r, errbuf, errlen);
    if (rc == 0)
        rc = fr_bootenv_parse_long(wname, wtext, 1, FR_BOOTENV_MAX_WORLD, &w,
                                   errbuf, errlen);
    if (rc == 0 && r >= w) {
        ERR("%s=%ld is not below %s=%ld", rname, r, wname, w);
        out->rank = (int)r;
        out->world_size = (int)w;
        out->rank_outside = 1;
        return FRPC_EINVAL;
    }
    if (rc == 0) {
        out->rank = (int)r;
        out->world_size = (int)w;
    }
    return rc;
}

static int resolve_rank(int cfg_rank, int cfg_world, fr_bootenv *out,
                        char *errbuf, size_t errlen)
{
    char rbuf[24], wbuf[24];
    bool found;
    snprintf(rbuf, sizeof(rbuf), "%d", cfg_rank);
    snprintf(wbuf, sizeof(wbuf), "%d", cfg_world);
    int rc = take_pair("config rank", cfg_rank >= 0 ? rbuf : NULL,
                       "config world_size", cfg_world >= 0 ? wbuf : NULL, out,
                       &found, errbuf, errlen);
    out->source = "config";
    out->rank_name = "config.rank";
    for (size_t i = 0; rc == 0 && !found && i < sizeof(env_pairs) /
                                                sizeof(env_pairs[0]); i++) {
        const char *world = env_pairs[i].world, *alt = env_pairs[i].world_alt;
        const char *wname = world;
        char both[96]; /* what a missing world size is called */
        if (!env_text(world) && alt) {
            if (env_text(alt)) {
                world = wname = alt;
            } else {
                snprintf(both, sizeof(both), "%s (or %s)", world, alt);
                wname = both;
            }
        }
        rc = take_pair(env_pairs[i].rank, env_text(env_pairs[i].rank), wname,
                       env_text(world), out, &found, errbuf, errlen);
        out->source = env_pairs[i].source;
        out->rank_name = env_pairs[i].rank;
    }
    if (rc == 0 && !found) {
        out->rank = 0;
        out->world_size = 1;
        out->source = "default";
        out->rank_name = "the default rank";
    }
    return rc;
}

static int resolve_store(const char *cfg_store_addr, fr_bootenv *out,
                         char *errbuf, size_t errlen)
{
    const char *addr = (cfg_store_addr && *cfg_store_addr) ? cfg_store_addr
                                                           : NULL;
    const char *name = "config store_addr";
    if (!addr && (addr = env_text("FABRPC_STORE_ADDR")))
        name = "FABRPC_STORE_ADDR";
    if (addr) {
        out->store_source = addr == cfg_store_addr ? "config" : name;
        return fr_bootenv_parse_addr(name, addr, out->store_host,
                                     sizeof(out->store_host), &out->store_port,
                                     errbuf, errlen);
    }
    const char *ma = env_text("MASTER_ADDR"), *mp = env_text("MASTER_PORT");
    if (!ma && !mp) {
        out->store_source = "default";
        strcpy(out->store_host, FR_BOOTENV_DEFAULT_HOST);
        out->store_port = FR_BOOTENV_DEFAULT_PORT;
        return 0;
    }
    out->store_source = "MASTER_ADDR";
    if (!ma || !mp) {
        ERR("%s=%.64s is set but %s is not", ma ? "MASTER_ADDR" : "MASTER_PORT",
            ma ? ma : mp, ma ? "MASTER_PORT" : "MASTER_ADDR");
        return FRPC_EINVAL;
    }
    size_t len = strlen(ma);
    const char *h = ma;
    if (len >= 2 && ma[0] == '[' && ma[len - 1] == ']') {
        h++;
        len -= 2;
    }
    int rc = copy_host("MASTER_ADDR", ma, h, len, out->store_host,
                       sizeof(out->store_host), errbuf, errlen);
    if (!rc)
        rc = parse_port("MASTER_PORT", mp, &out->store_port, errbuf, errlen);
    /* torchrun's agent already serves its own store on MASTER_PORT: ours
     * takes the next port. */
    if (!rc && out->store_port == 65535) {
        ERR("MASTER_PORT=65535 leaves no port for the fabrpc store "
            "(it uses MASTER_PORT+1)");
        return FRPC_EINVAL;
    }
    if (!rc)
        out->store_port++;
    return rc;
}

int fr_bootenv_resolve_rank(int cfg_rank, int cfg_world, fr_bootenv *out,
                            char *errbuf, size_t errlen)
{
    if (!out) {
        ERR("fr_bootenv_resolve_rank: out is NULL");
        return FRPC_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    return resolve_rank(cfg_rank, cfg_world, out, errbuf, errlen);
}

int fr_bootenv_resolve(int cfg_rank, int cfg_world, const char *cfg_store_addr,
                       fr_bootenv *out, char *errbuf, size_t errlen)
{
    if (!out) {
        ERR("fr_bootenv_resolve: out is NULL");
        return FRPC_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    int rc = resolve_rank(cfg_rank, cfg_world, out, errbuf, errlen);
    /* A rank out of range still looks for the store (quietly: the rank's
     * error is the one to report), where it may tell the others. */
    if (rc && out->rank_outside &&
        resolve_store(cfg_store_addr, out, NULL, 0) != 0)
        out->rank_outside = 0;
    return rc ? rc : resolve_store(cfg_store_addr, out, errbuf, errlen);
}
