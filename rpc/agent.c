/*
 * The agent's life: init (settings, providers, bootstrap through the
 * store, endpoint, address exchange, progress thread), barrier, shutdown,
 * and the small accessors.
 */
#include "config.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "comm/clock.h"
#include "comm/doorbell.h"
#include "comm/fault.h"
#include "comm/fi_load.h"
#include "comm/sha256.h"
#include "comm/shm_repair.h"
#include "comm/signal_hold.h"
#include "rpc/agent.h"
#include "rpc/emu.h"

#define FR_EAGER_MAX (64u << 10)
#define FR_RECV_COUNT 64
#define FR_ADDR_MAX 512

static void say(char *err, size_t errlen, const char *f, ...)
{
    va_list ap;
    if (!err || !errlen)
        return;
    va_start(ap, f);
    vsnprintf(err, errlen, f, ap);
    va_end(ap);
}

_Thread_local int fr_agent_inside FR_TLS_FAST;
_Thread_local frpc_agent *fr_agent_inside_of[FR_INSIDE_KNOWN] FR_TLS_FAST;

/* Remaining milliseconds until deadline, at least 1. */
static int left_ms(uint64_t deadline)
{
    uint64_t now = fr_now_ns();
    if (deadline == UINT64_MAX)
        return 0;
    return now >= deadline ? 1 : (int)((deadline - now) / 1000000) + 1;
}

static int store_get_str(frpc_agent *a, const char *key, uint64_t deadline,
                         char **out, size_t *len)
{
    void *v = NULL;
    size_t n = 0;
    int rc = fr_store_get(a->store, key, left_ms(deadline), &v, &n);
    if (rc)
        return rc;
    char *s = realloc(v, n + 1);
    if (!s) {
        free(v);
        return FRPC_ENOMEM;
    }
    s[n] = '\0';
    *out = s;
    if (len)
        *len = n;
    return 0;
}

/* The store's explanation of its last failure, "" without a store. */
static const char *store_why(const frpc_agent *a)
{
    return a->store ? fr_store_last_error(a->store) : "";
}

fr_store_ident fr_agent_store_ident(const frpc_agent *a, fr_store_role role)
{
    return (fr_store_ident){.rank = a->set.rank,
                            .world = a->set.world,
                            .version = FR_ENV_VERSION,
                            .key = (const uint8_t *)a->set.job_key,
                            .key_len = a->set.job_key_len,
                            .role = role,
                            .liveness_ms = a->set.peer_timeout_ms};
}

/* After a failure to serve or reach the store: where its address came
 * from, when that is not plain to see (a default nobody chose, on several
 * hosts the wrong one; a port one above the one the user set). */
static void store_hint(const fr_settings *s, char *err, size_t errlen)
{
    size_t n = strlen(err);
    if (n + 1 >= errlen || !s->store_source)
        return;
    if (strcmp(s->store_source, "default") == 0)
        snprintf(err + n, errlen - n, " (the default store address: neither "
                 "FABRPC_STORE_ADDR nor MASTER_ADDR/MASTER_PORT is set; "
                 "ranks on several hosts need one that names rank 0's "
                 "host)");
    else if (strcmp(s->store_source, "MASTER_ADDR") == 0)
        snprintf(err + n, errlen - n, " (port MASTER_PORT+1: MASTER_PORT "
                 "itself is left to torch.distributed's store)");
}

/* The store refused this rank: another live process holds it. The
 * launcher gave two processes one rank, so this rank's value is wrong,
 * as a rank out of range is: FRPC_EINVAL, naming where it came from. */
static int rank_taken(const fr_settings *s, char *err, size_t errlen)
{
    size_t n = strlen(err);
    if (n + 1 < errlen)
        snprintf(err + n, errlen - n, " (this process took its rank from "
                 "%s=%d: each process of the job needs its own)",
                 s->rank_name, s->rank);
    return FRPC_EINVAL;
}

/* Joins the job's store as this rank (its main connection) for at most
 * ms and leaves at once: how a rank that cannot take part tells the job,
 * whose store refuses it and, while the job joins, poisons it
 * (store_members.c). The store's answer, 0 if it took this rank; its
 * text in why. */
static int ask_store_as_me(frpc_agent *a, int ms, char *why, size_t whylen,
                           fr_store_outcome *how)
{
    fr_store_ident me = fr_agent_store_ident(a, FR_STORE_ROLE_MAIN);
    fr_store_client *c = NULL;
    int rc = fr_store_connect_how(a->set.store_host, a->set.store_port, ms,
                                  &me, &c, why, whylen, how);
    fr_store_close(c);
    return rc;
}

/* How long rank 0 that cannot listen looks for its job's store there. */
#define RANK0_PROBE_MS 1000

/*
 * Rank 0 could not listen at the store's address. If this job's store
 * answers there, another process serves it, which only a rank 0 does: two
 * processes were started as rank 0. Asked as rank 0, the store refuses
 * this one and, while the job joins, poisons it, so that the other
 * ranks' frpc_init fails at once ("rank 0 was claimed twice") rather than
 * the first rank 0 waiting for ranks that never come. Returns this
 * process's code, err saying why: FRPC_EINVAL (rank 0 taken), or the
 * store's own refusal, as a rank other than 0 gets it (FRPC_EACCES: the
 * job key is not the job's; FRPC_EBOOTSTRAP: world size or version);
 * 0 if no store of a job answers there (err kept: why it could not
 * listen).
 */
static int rank0_verdict(frpc_agent *a, uint64_t deadline, char *err,
                         size_t errlen)
{
    const fr_settings *s = &a->set;
    char why[512] = "";
    int ms = left_ms(deadline);
    /* 0: joined (a first rank 0 not connected yet): it will be the one
     * refused. */
    fr_store_outcome how;
    int rc = ask_store_as_me(a, ms < RANK0_PROBE_MS ? ms : RANK0_PROBE_MS,
                             why, sizeof(why), &how);
    if (rc == 0) {
        say(err, errlen, "rank 0 of this job already serves its store at "
            "%s", s->store_at);
        return rank_taken(s, err, errlen);
    }
    /* Unreachable, not a store, or a store of an earlier run still
     * refusing: no store of a job answered. Another program holding the
     * port says what it is (its answer's start, as rank 1 hears it). */
    if (how != FR_STORE_REFUSED) {
        size_t n = strlen(err);
        if (rc == FRPC_EPROTO && n + 4 < errlen) {
            const char *its = strstr(why, "not a fabrpc bootstrap store");
            snprintf(err + n, errlen - n, " (%s)", its ? its : why);
        }
        return 0;
    }
    say(err, errlen, "%s", why);
    return rc == FRPC_EEXIST ? rank_taken(s, err, errlen) : rc;
}

static int connect_store(frpc_agent *a, uint64_t deadline, char *err,
                         size_t errlen)
{
    const fr_settings *s = &a->set;
    fr_store_ident me = fr_agent_store_ident(a, FR_STORE_ROLE_MAIN);
    int rc;
    if (s->rank == 0) {
        /* Only this process's own connection joins as rank 0. */
        me.own_client = true;
        rc = fr_store_server_start(s->store_host, s->store_port, &me,
                                   &a->store_srv, err, errlen);
        if (rc) {
            int verdict = rank0_verdict(a, deadline, err, errlen);
            if (verdict)
                return verdict;
            store_hint(s, err, errlen); /* could not listen there */
            return rc;
        }
        me.own_server = a->store_srv;
    }
    fr_store_outcome how;
    rc = fr_store_connect_how(s->store_host, s->store_port, left_ms(deadline),
                              &me, &a->store, err, errlen, &how);
    /* Not when the store answered: a refusal is about the rank. */
    if (how == FR_STORE_UNREACHED)
        store_hint(s, err, errlen);
    if (rc == FRPC_EEXIST) /* another process holds this rank */
        rc = rank_taken(s, err, errlen);
    return rc;
}

/* How long a rank out of range looks for the store to tell the job. */
#define TELL_OUTSIDE_MS 5000

/*
 * This rank is not below its world size (RANK=2 WORLD_SIZE=2: rank 1 was
 * meant). It cannot join, but the others would wait for the rank it
 * should have been until their init timeout. So it joins rank 0's store
 * as what it is: the store refuses it and, while the job is joining,
 * poisons it (store_members.c), so that every rank's frpc_init fails at
 * once naming it. At most TELL_OUTSIDE_MS (or init_timeout_ms if less)
 * while the store is not up yet; appends the outcome to err.
 */
static void tell_rank_outside(frpc_agent *a, char *err, size_t errlen)
{
    const fr_settings *s = &a->set;
    char why[256] = "";
    int ms = s->init_timeout_ms < TELL_OUTSIDE_MS ? s->init_timeout_ms
                                                  : TELL_OUTSIDE_MS;
    int rc = ask_store_as_me(a, ms, why, sizeof(why), NULL);
    size_t n = strlen(err);
    if (n + 1 >= errlen)
        return;
    if (rc == FRPC_ENORANK)
        snprintf(err + n, errlen - n, " (told the store at %s: the "
                 "other ranks' frpc_init, if still under way, fails too; "
                 "a job already running goes on)", s->store_at);
    else
        snprintf(err + n, errlen - n, " (could not tell the other ranks "
                 "through the store at %s: %s)", s->store_at, why);
}

/* What tells this host apart: its boot and this pid namespace. Two ranks
 * with the same id can watch each other's pids. */
static void host_id(char *buf, size_t len)
{
    char boot[64] = "";
    char ns[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof(boot), f))
            boot[0] = '\0';
        fclose(f);
        boot[strcspn(boot, "\n")] = '\0';
    }
    ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
    ns[n > 0 ? n : 0] = '\0';
    snprintf(buf, len, "%s/%s", boot, ns);
}

/* One rank's published facts: "providers\nhostname\nhostid\npid". */
typedef struct rank_info {
    char *up, *host, *hostid;
    int pid;
} rank_info;

static int parse_info(char *v, rank_info *ri)
{
    char *save = NULL;
    ri->up = strtok_r(v, "\n", &save);
    ri->host = strtok_r(NULL, "\n", &save);
    ri->hostid = strtok_r(NULL, "\n", &save);
    char *pid = strtok_r(NULL, "\n", &save);
    if (!ri->up || !ri->host || !ri->hostid || !pid)
        return FRPC_EPROTO;
    ri->pid = atoi(pid);
    return 0;
}

/* No provider is in every rank's list: name rank 0's and the first few
 * that differ from it (the ranks to look at; "this rank" named rank 0's
 * own list on rank 0, and never the odd one). */
static void say_no_common(const char **lists, int world, int same_host,
                          char *err, size_t errlen)
{
    if (!err || !errlen)
        return;
    int n = snprintf(err, errlen, "no provider is common to all %d ranks "
                     "(rank 0 has \"%s\"", world, lists[0]);
    for (int r = 1, shown = 0; r < world && n > 0 && (size_t)n < errlen;
         r++) {
        if (strcmp(lists[r], lists[0]) == 0)
            continue;
        if (shown++ == 3) {
            n += snprintf(err + n, errlen - (size_t)n, ", ...");
            break;
        }
        n += snprintf(err + n, errlen - (size_t)n, ", rank %d \"%s\"", r,
                      lists[r]);
    }
    if (n > 0 && (size_t)n < errlen)
        snprintf(err + n, errlen - (size_t)n, "%s)",
                 same_host ? "" : "; shm needs one host");
}

/* Every rank publishes the providers that came up, its host and pid; all
 * pick the same provider from rank 0's order. peers gets what liveness
 * needs of each rank. */
static int agree_provider(frpc_agent *a, uint64_t deadline,
                          fr_peer_info *peers, char *err, size_t errlen)
{
    char key[64], mine[1024], up[512], host[256] = "", hid[160];
    int world = a->set.world, same_host = 1, rc;
    char **raw = calloc((size_t)world, sizeof(char *));
    rank_info *ri = calloc((size_t)world, sizeof(*ri));
    const char **lists = calloc((size_t)world, sizeof(char *));

    if (!raw || !ri || !lists) {
        rc = FRPC_ENOMEM;
        goto out;
    }
    fr_backends_up_list(&a->backends, up, sizeof(up));
    gethostname(host, sizeof(host) - 1);
    host_id(hid, sizeof(hid));
    snprintf(mine, sizeof(mine), "%s\n%s\n%s\n%d", up[0] ? up : ",", host,
             hid, (int)getpid());
    snprintf(key, sizeof(key), "info/%d", a->set.rank);
    rc = fr_store_set(a->store, key, mine, strlen(mine));
    int missing = -1; /* the first rank whose entry never came */
    for (int r = 0; !rc && r < world; r++) {
        snprintf(key, sizeof(key), "info/%d", r);
        rc = store_get_str(a, key, deadline, &raw[r], NULL);
        if (rc == FRPC_ETIMEDOUT)
            missing = r;
        if (!rc && (rc = parse_info(raw[r], &ri[r])) == 0) {
            lists[r] = ri[r].up;
            same_host &= strcmp(ri[r].host, ri[0].host) == 0;
            peers[r].pid = ri[r].pid;
            peers[r].same_host = strcmp(ri[r].hostid, hid) == 0;
        }
    }
    if (rc && missing >= 0) {
        /* On the rank serving the store: a member started without the
         * job's key fails at once itself, and is named here. */
        char keyfail[320], refused[420] = "";
        uint64_t nkey = fr_store_server_key_failures(a->store_srv, keyfail,
                                                     sizeof(keyfail));
        if (nkey)
            snprintf(refused, sizeof(refused),
                     "; the store refused %llu connection(s) without the job "
                     "key, the last: %s", (unsigned long long)nkey, keyfail);
        say(err, errlen,
            "bootstrap: rank %d of %d never joined the store at %s within "
            "init_timeout_ms (%d ms)%s%s", missing, world, a->set.store_at,
            a->set.init_timeout_ms,
            missing + 1 < world ? "; ranks after it were not looked for"
                                : "",
            refused);
    } else if (rc) {
        say(err, errlen,
            "bootstrap: rank %d did not get the other ranks' providers from "
            "the store at %s: %s%s%s",
            a->set.rank, a->set.store_at,
            frpc_strerror(rc), *store_why(a) ? ": " : "",
            store_why(a));
        rc = rc == FRPC_ETIMEDOUT ? FRPC_EBOOTSTRAP : rc;
    } else {
        rc = fr_backends_choose(lists[0], lists, world, same_host,
                                a->provider, sizeof(a->provider));
        if (rc)
            say_no_common(lists, world, same_host, err, errlen);
    }
out:
    for (int r = 0; raw && r < world; r++)
        free(raw[r]);
    free(raw);
    free(ri);
    free(lists);
    return rc;
}

/* Each bootstrap step after the providers' agreement names, on failure,
 * what it waited for: "timed out" alone does not say which rank. */
typedef struct boot_step {
    const char *what; /* "while waiting for the job's token from" */
    int rank;         /* whose entry or answer, -1 if none */
} boot_step;

static int exchange_token(frpc_agent *a, uint64_t deadline, boot_step *st)
{
    *st = (boot_step){"while waiting for the job's token from", 0};
    char *v = NULL;
    size_t n = 0;
    int rc;
    if (a->set.rank == 0) {
        if (getrandom(&a->token, sizeof(a->token), 0) !=
            (ssize_t)sizeof(a->token))
            a->token = fr_now_ns() ^ ((uint64_t)getpid() << 32);
        return fr_store_set(a->store, "token", &a->token, sizeof(a->token));
    }
    rc = store_get_str(a, "token", deadline, &v, &n);
    if (!rc && n != sizeof(a->token))
        rc = FRPC_EPROTO;
    if (!rc)
        memcpy(&a->token, v, sizeof(a->token));
    free(v);
    return rc;
}

static int exchange_addresses(frpc_agent *a, uint64_t deadline,
                              boot_step *st)
{
    char addr[FR_ADDR_MAX], key[64];
    *st = (boot_step){"while publishing its endpoint address", -1};
    size_t len = sizeof(addr);
    int rc = fr_fabric_getname(a->fab, addr, &len);
    if (rc)
        return rc;
    if (a->set.world == 1)
        return fr_fabric_set_peer(a->fab, 0, addr, len);
    snprintf(key, sizeof(key), "addr/%d", a->set.rank);
    if (fr_fault_hit(FR_FAULT_ADDR_STOPS))
        raise(SIGSTOP);
    if ((rc = fr_store_set(a->store, key, addr, len)))
        return rc;
    if (fr_fault_hit(FR_FAULT_ADDR_LATE))
        nanosleep(&(struct timespec){0, FR_FAULT_LATE_MS * 1000000L}, NULL);
    for (int r = 0; r < a->set.world && !rc; r++) {
        char *v = NULL;
        size_t n = 0;
        snprintf(key, sizeof(key), "addr/%d", r);
        *st = (boot_step){"while waiting for the endpoint address of", r};
        rc = store_get_str(a, key, deadline, &v, &n);
        if (!rc)
            rc = fr_fabric_set_peer(a->fab, (uint32_t)r, v, n);
        free(v);
    }
    return rc;
}

/* fr_fabric_callbacks.call_deadline: a response's rendezvous read may
 * take as long as the call it answers still waits. */
static uint64_t call_deadline(void *ctx, uint32_t src, uint64_t req_id)
{
    frpc_agent *a = ctx;
    return fr_pending_deadline_of(&a->pend, req_id, src);
}

static int open_transport(frpc_agent *a, char *err, size_t errlen)
{
    const fr_backend *b = fr_backends_find(&a->backends, a->provider);
    fr_fabric_opts o = {.max_msg = a->set.max_msg,
                        .eager_max = FR_EAGER_MAX,
                        .recv_count = FR_RECV_COUNT,
                        .coalesce = a->set.coalesce,
                        .time_completions = a->set.fn_stats,
                        .split_max = a->set.shm_split_max,
                        .never_sleeps =
                            a->set.progress == FRPC_PROGRESS_BUSY,
                        .cb = {.on_msg = fr_agent_on_msg,
                               .on_send_error = fr_agent_on_send_error,
                               .on_reply_unreadable =
                                   fr_agent_on_reply_unreadable,
                               .on_poll_end = fr_agent_on_poll_end,
                               .on_peer_unreachable =
                                   fr_agent_on_peer_unreachable,
                               .on_connection_dropped =
                                   fr_agent_on_connection_dropped,
                               .call_deadline = call_deadline,
                               .ctx = a}};
    char name[128];
    int rc;
    if (!b || !b->up)
        return FRPC_ENOBACKEND;
    if (strcmp(a->provider, "shm") == 0) {
        fr_agent_shm_name(a, (uint32_t)a->set.rank, name, sizeof(name));
        o.ep_name = name;
    }
    snprintf(a->provider_full, sizeof(a->provider_full), "%s",
             b->info->fabric_attr->prov_name);
    /* udp's ofi_rxd delivered a request twice (dedup.h). */
    if (strcmp(a->provider, "udp") == 0 && !a->dedup_on) {
        if (fr_dedup_init(&a->dedup, (uint32_t)a->set.world))
            return FRPC_ENOMEM;
        a->dedup_on = 1;
    }
    rc = fr_fabric_open(b->info, &o, &a->fab, err, errlen);
    if (!rc)
        rc = fr_fabric_set_identity(a->fab, (uint32_t)a->set.rank,
                                    (uint32_t)a->set.world, a->token);
    if (!rc) {
        a->pend.wake_ctx = a->fab;
        a->pend.wake = fr_fabric_wake_sleepers;
        a->pend.wake_keeper = fr_fabric_wake_keeper;
        rc = fr_emu_choose(a, err, errlen); /* native or emulated RMA */
    }
    return rc;
}

/* The base of this job's names in /dev/shm: "fabrpc_<job id>_<hash>".
 * fabrpc-run removes what a killed rank leaves there by its job id
 * (FABRPC_JOB_ID): it must be in the name. The names are published (an
 * endpoint's name is its address, and anyone may list /dev/shm): they
 * must not show the job token, so they hold a hash of it, the same on
 * every rank. */
static void shm_base(const frpc_agent *a, char *buf, size_t len)
{
    const char *job = getenv("FABRPC_JOB_ID");
    static const char tag[] = "fabrpc shm endpoint name";
    uint8_t h[FR_SHA256_LEN];
    fr_sha256 s;
    fr_sha256_init(&s);
    fr_sha256_update(&s, tag, sizeof(tag));
    fr_sha256_update(&s, &a->token, sizeof(a->token));
    fr_sha256_final(&s, h);
    snprintf(buf, len, "fabrpc_%.40s_%02x%02x%02x%02x%02x%02x%02x%02x",
             job && *job && !strchr(job, '/') ? job : "nojob", h[0], h[1],
             h[2], h[3], h[4], h[5], h[6], h[7]);
}

static void region_name(const char *base, uint32_t rank, char *buf,
                        size_t len)
{
    snprintf(buf, len, "%s_%u", base, rank);
}

void fr_agent_shm_name(const frpc_agent *a, uint32_t rank, char *buf,
                       size_t len)
{
    char base[72];
    shm_base(a, base, sizeof(base));
    region_name(base, rank, buf, len);
}

void fr_agent_unlink_names_of(const frpc_agent *a, uint32_t rank)
{
    char base[72], name[160];
    if (strcmp(a->provider, "shm") != 0 || !a->token)
        return;
    shm_base(a, base, sizeof(base));
    region_name(base, rank, name, sizeof(name));
    shm_unlink(name);
    fr_doorbell_name(base, rank, name, sizeof(name));
    shm_unlink(name);
}

/* A failed frpc_init: what same-host ranks that died during it left
 * (fabrpc-run cleans after its jobs, a torchrun-style launcher does not).
 * Dead: its process has ended (a pid reused since is taken for alive,
 * and its names stay). */
#define FR_DEATH_GRACE_MS 250

static void clean_after_dead_peers(const frpc_agent *a,
                                   const fr_peer_info *peers, int rc)
{
    int world = a->set.world;
    /* A death: of a rank (the store saw it), of rank 0 (the store gone). */
    if ((rc != FRPC_EPEERLOST && rc != FRPC_EBOOTSTRAP) || !peers ||
        strcmp(a->provider, "shm") != 0)
        return;
    int *pid = calloc((size_t)world, sizeof(*pid));
    unsigned char *ended = calloc((size_t)world, 1);
    for (int r = 0; pid && ended && r < world; r++)
        pid[r] = r != a->set.rank && peers[r].same_host ? peers[r].pid : 0;
    if (pid && ended)
        fr_processes_ended(pid, (size_t)world, FR_DEATH_GRACE_MS, ended);
    for (int r = 0; pid && ended && r < world; r++)
        if (ended[r])
            fr_agent_unlink_names_of(a, (uint32_t)r);
    free(pid);
    free(ended);
}

/* shm has no wait object: give this rank a doorbell peers ring. */
static int open_doorbell(frpc_agent *a, char *err, size_t errlen)
{
    if (strcmp(a->provider, "shm") != 0)
        return 0;
    char base[72];
    shm_base(a, base, sizeof(base));
    int rc = fr_doorbell_open(base, (uint32_t)a->set.rank,
                              (uint32_t)a->set.world, &a->bell, err, errlen);
    if (!rc)
        fr_fabric_set_doorbell(a->fab, a->bell);
    return rc;
}

static int barrier(frpc_agent *a, int timeout_ms);

/* frpc_init's message for a death or the store's loss, not the clock. */
static void say_job_broke(const frpc_agent *a, int rc, char *err,
                          size_t errlen)
{
    say(err, errlen, "rank %d: the job broke before every rank joined: %s",
        a->set.rank, *store_why(a) ? store_why(a) : frpc_strerror(rc));
}

/* How long a rank whose bell is gone is given to be reported dead. */
#define BELL_GONE_MS 1000

/* The store's word on a death, waited for up to BELL_GONE_MS (within
 * deadline): FRPC_EPEERLOST or FRPC_EBOOTSTRAP, or 0 if none came. */
static int death_told(frpc_agent *a, uint64_t deadline)
{
    uint64_t until = fr_deadline_ms(BELL_GONE_MS);
    until = deadline < until ? deadline : until;
    for (;;) {
        pthread_mutex_lock(&a->store_lock);
        int rc = fr_agent_job_whole(a);
        pthread_mutex_unlock(&a->store_lock);
        if (rc || fr_now_ns() >= until)
            return rc;
        fr_hold_poll(NULL, 0, 5); /* 5 ms; a signal held off comes in */
    }
}

/* After the init barrier every rank's bell exists: map them all, meet
 * again (by frpc_init's deadline), and drop the names (the mappings
 * stay). A bell that is gone is the mark of a rank that ended since the
 * barrier (its exit removed the name, before its store connection
 * closed): its death is waited for and told as one (FRPC_EPEERLOST, as
 * the header promises; it was FRPC_ETRANSPORT, 5 of 700 jobs whose rank 1
 * exits during init), and only a bell missing while every rank lives
 * fails the transport. */
static int connect_doorbells(frpc_agent *a, uint64_t deadline, char *err,
                             size_t errlen)
{
    int rc = 0;
    if (!a->bell)
        return 0;
    if (fr_fault_hit(FR_FAULT_JOINED_DIES))
        exit(9);
    if (fr_fault_hit(FR_FAULT_BELLS_LATE))
        nanosleep(&(struct timespec){0, FR_FAULT_LATE_MS * 1000000L}, NULL);
    for (int r = 0; r < a->set.world && !rc; r++)
        if ((rc = fr_doorbell_connect(a->bell, (uint32_t)r))) {
            int death = death_told(a, deadline);
            if (death) {
                rc = death;
                say_job_broke(a, rc, err, errlen);
            } else {
                say(err, errlen, "rank %d cannot map the doorbell of rank "
                    "%d", a->set.rank, r);
            }
        }
    if (!rc && a->set.world > 1 && (rc = barrier(a, left_ms(deadline)))) {
        if (rc == FRPC_ETIMEDOUT)
            say(err, errlen, "rank %d: not every rank mapped the doorbells "
                "within %d ms", a->set.rank, a->set.init_timeout_ms);
        else
            say_job_broke(a, rc, err, errlen);
    }
    fr_doorbell_unlink(a->bell);
    return rc;
}

/* How long rank 0's failed init keeps the store for the others at most. */
#define FAILED_INIT_LINGER_MS 3000

/*
 * Rank 0 serves the store, and its init may fail while the others still
 * read from it what makes theirs fail too: every rank finds no common
 * provider in the same lists, but rank 0, which closed the store at once,
 * left them "the connection to the bootstrap store was lost" instead.
 * So it waits until every connected rank has left or died (a failing
 * rank leaves at once; one still waiting for this rank is told that it
 * left), within the init deadline and FAILED_INIT_LINGER_MS. A job that
 * cannot start (a rank claimed twice, or out of range) is also kept for
 * the ranks not there yet: a rank started a moment later would otherwise
 * find no store until its init timeout.
 */
static void linger_store(frpc_agent *a, uint64_t deadline)
{
    if (!a->store_srv)
        return;
    uint64_t until = fr_deadline_ms(FAILED_INIT_LINGER_MS);
    until = deadline < until ? deadline : until;
    /* In slices: between them a signal held off in frpc_init comes in
     * (comm/signal_hold.h), not only after the whole linger. */
    while (fr_now_ns() < until) {
        int ms = left_ms(until);
        if (fr_store_server_wait_told(a->store_srv, ms < 20 ? ms : 20) == 0)
            break;
        fr_hold_poll(NULL, 0, 0);
    }
}

/* A wait on a key nobody sets ends at once with the store's word on a
 * death; else it times out after a millisecond. */
#define FR_NEVER_SET_KEY "fabrpc/never-set"

int fr_agent_job_whole(void *ctx)
{
    frpc_agent *a = ctx;
    void *v = NULL;
    size_t n = 0;
    int rc = fr_store_get(a->store, FR_NEVER_SET_KEY, 1, &v, &n);
    free(v);
    return rc == FRPC_EPEERLOST || rc == FRPC_EBOOTSTRAP ? rc : 0;
}

/*
 * On shm no rank sends before every rank has put every address in its
 * address vector. A rank's first send to a peer leaves a connection
 * request in the peer's queue, and the peer's progress reads the
 * sender's region through the mapping its own fi_av_insert made (or
 * makes then, by name). When the sender died in between, its region's
 * name went with it (its exit, or our cleaning after a death): the
 * mapping failed, quietly, and Debian's libfabric 1.17 dereferences it
 * (smr_progress_connreq: rank 0 killed by SIGSEGV in its first fi_cq_read,
 * 1 of 300 jobs whose rank 1 exits during frpc_init). After this barrier
 * every mapping was made while its rank lived, and a mapping outlives
 * its name.
 */
static int addresses_mapped(frpc_agent *a, uint64_t deadline, boot_step *st)
{
    if (strcmp(a->provider, "shm") != 0)
        return 0;
    *st = (boot_step){"while waiting for every rank to map the others' "
                      "endpoints", -1};
    return barrier(a, left_ms(deadline));
}

/* The fault site FR_FAULT_LOCK_DIES: a sender killed inside the
 * provider, the next rank's region locked. */
static void die_holding_a_lock(const frpc_agent *a, const fr_peer_info *peers)
{
    uint32_t next = (uint32_t)(a->set.rank + 1) % (uint32_t)a->set.world;
    char name[128];
    if (!peers || strcmp(a->provider, "shm") != 0)
        return;
    fr_agent_shm_name(a, next, name, sizeof(name));
    if (fr_shm_take_lock(name, peers[next].pid) == 0)
        _exit(9);
}

static int connect_peers(frpc_agent *a, uint64_t deadline,
                         const fr_peer_info *peers, boot_step *st)
{
    *st = (boot_step){"while sending a first message to every rank's "
                      "endpoint", -1};
    if (fr_fault_hit(FR_FAULT_LOCK_DIES))
        die_holding_a_lock(a, peers);
    return fr_fabric_connect_peers(a->fab, deadline, fr_agent_job_whole, a);
}

/* A step that ran out of time says what it waited for: a rank that
 * joined and then stopped (SIGSTOP, a debugger, a swapped-out host) is
 * named, so the user knows which process to look at. */
static void say_step_failed(const frpc_agent *a, const boot_step *st, int rc,
                            char *err, size_t errlen)
{
    char whom[32] = "";
    if (st->rank >= 0)
        snprintf(whom, sizeof(whom), " rank %d", st->rank);
    if (rc == FRPC_ETIMEDOUT)
        say(err, errlen,
            "bootstrap: rank %d timed out (init_timeout_ms %d ms) %s%s "
            "(store at %s)%s", a->set.rank, a->set.init_timeout_ms,
            st->what, whom, a->set.store_at,
            st->rank >= 0 ? ": that rank joined the job but went no "
                            "further (stopped, or too slow)" : "");
    else
        say(err, errlen,
            "bootstrap through the store at %s failed on rank %d "
            "%s%s: %s%s%s",
            a->set.store_at, a->set.rank, st->what,
            whom, frpc_strerror(rc), *store_why(a) ? ": " : "",
            store_why(a));
}

static int bootstrap(frpc_agent *a, uint64_t deadline, fr_peer_info *peers,
                     char *err, size_t errlen)
{
    int rc;

    if (a->set.world == 1) {
        /* Alone: no store; the first provider that came up will do. */
        for (int i = 0; i < a->backends.n && !a->provider[0]; i++)
            if (a->backends.b[i].up)
                snprintf(a->provider, sizeof(a->provider), "%s",
                         a->backends.b[i].name);
        if (getrandom(&a->token, sizeof(a->token), 0) != sizeof(a->token))
            a->token = fr_now_ns();
        if ((rc = open_transport(a, err, errlen)) ||
            (rc = open_doorbell(a, err, errlen)))
            return rc;
        boot_step st;
        return exchange_addresses(a, deadline, &st);
    }
    if ((rc = connect_store(a, deadline, err, errlen)))
        return rc;
    /* frpc_init's deadline bounds every store operation, also while rank
     * 0 is stopped (lifted when init succeeds). */
    fr_store_cap(a->store, (int64_t)(deadline / 1000000u));
    if ((rc = agree_provider(a, deadline, peers, err, errlen)))
        return rc;
    boot_step st = {"", -1};
    if ((rc = exchange_token(a, deadline, &st)) ||
        (rc = open_transport(a, err, errlen)) ||
        (rc = open_doorbell(a, err, errlen)) ||
        (rc = exchange_addresses(a, deadline, &st)) ||
        (rc = addresses_mapped(a, deadline, &st)) ||
        (rc = fr_shm_guard_start(a, peers, &a->shm_guard)) ||
        (rc = connect_peers(a, deadline, peers, &st))) {
        if (err && !err[0])
            say_step_failed(a, &st, rc, err, errlen);
        return rc == FRPC_ETIMEDOUT ? FRPC_EBOOTSTRAP : rc;
    }
    return 0;
}

/* Waits for the threads inside a call on the agent to leave it. Their
 * waits end by themselves: calls in flight have failed, every other wait
 * sees shutting_down, and a sleeping waiter looks again within 20 ms (a
 * kick makes it sooner). But a sync call that lent its args waits until
 * its callee cannot read them (rpc/call.c): a callee that dies now is
 * noticed here, and past deadline the loans are taken back
 * (fr_fabric_revoke_loans: the callee's handler never sees them). */
static void wait_users(frpc_agent *a, uint64_t deadline)
{
    int revoked = 0;
    while (atomic_load(&a->users) > 0) {
        fr_pending_kick(&a->pend);
        fr_liveness_reap_ended(a);
        if (!revoked && a->fab && fr_now_ns() >= deadline) {
            fr_fabric_revoke_loans(a->fab);
            revoked = 1;
        }
        fr_hold_poll(NULL, 0, 1); /* 1 ms; a signal held off comes in */
    }
}

/* Every call ends exactly once: what is still in flight ends now, and
 * what a callback run after (the pool's drain, a connection's drop) would
 * start is refused: nothing would end it. Before the liveness thread is
 * joined: the peer-lost function may be waiting in such a call. */
#define FR_SHUT_BEFORE_ANSWER "the agent shut down before the answer came"

static void end_calls(frpc_agent *a)
{
    fr_pending_close(&a->pend, FR_SHUT_BEFORE_ANSWER);
}

/* Once the liveness thread watches the peers, or the regions go. */
static void stop_shm_guard(frpc_agent *a)
{
    fr_shm_guard_stop(a->shm_guard);
    a->shm_guard = NULL;
}

/* From the liveness thread's stop until the fabric closes the guard
 * watches the peers it watched (without a guard for want of memory or a
 * thread, as before it was made). */
static void guard_after_liveness(frpc_agent *a)
{
    fr_peer_info *peers = fr_liveness_unlost_peers(a);
    if (peers && !a->shm_guard)
        fr_shm_guard_start(a, peers, &a->shm_guard);
    free(peers);
}

/* Last: the requests never answered. An answer under way (answers
 * closed: it only frees its request) is waited for; one entering after
 * the flag touches no request (request.c: answer), so none frees one
 * twice or unlinks it from the list taken here. What starts after this
 * races with frpc_shutdown's return (fabrpc.h: req is gone). */
static void release_kept_requests(frpc_agent *a)
{
    atomic_store(&a->requests_released, 1);
    while (atomic_load(&a->users) > 0)
        fr_hold_poll(NULL, 0, 1);
    fr_agent_release_requests(a);
    fr_agent_free_spare_requests(a);
}

/* The test hook FR_FAULT_ANSWERS_CLOSED_LATE: once answers are closed,
 * waits (up to 10 s) until no kept request is left, so that a test's
 * thread answers in this stretch whatever the machine's load. */
static void fault_wait_kept_answered(frpc_agent *a)
{
    for (int i = 0; i < 10000; i++) {
        pthread_mutex_lock(&a->req_lock);
        int left = a->requests != NULL;
        pthread_mutex_unlock(&a->req_lock);
        if (!left)
            return;
        fr_hold_poll(NULL, 0, 1);
    }
}

/* Frees the agent; deadline bounds the wait for the provider to give
 * back the one-sided operations it holds (fr_fabric_quiesce). */
static void destroy(frpc_agent *a, uint64_t deadline)
{
    end_calls(a);
    /* A thread answering a stopped caller waits for room until the
     * caller's deadline, for ever without one: wait_users would too. */
    fr_fabric_end_waits(a->fab);
    fr_liveness_stop(a);
    guard_after_liveness(a);
    if (fr_fault_hit(FR_FAULT_SHUT_LATE))
        nanosleep(&(struct timespec){0, FR_FAULT_LATE_MS * 1000000L}, NULL);
    fr_progress_stop(a);
    wait_users(a, deadline);
    /* The progress thread, if it was stopped in pool handlers (standin.h):
     * waited for as the pool's handlers are, while the pool still runs
     * what they may wait for. */
    fr_progress_join(a);
    fr_pool_destroy(a->pool); /* runs what is queued: handlers, callbacks */
    /* A loan still out (a lent async call its callee never read) comes
     * back at fr_fabric_close, and its future's callback then runs on
     * this thread: fr_pool_submit(NULL) refuses. */
    a->pool = NULL;
    if (a->fab) /* bounded by the caller's deadline, and a second */
        fr_fabric_quiesce(a->fab, deadline < fr_deadline_ms(1000)
                                      ? deadline
                                      : fr_deadline_ms(1000));
    /* After the quiesce, whose polls still deliver requests: an inline
     * handler may answer a request kept earlier, or keep one. From here
     * an answer fails FRPC_ESHUTDOWN; one under way is sent, and waited
     * for. Kept requests stay valid until the end: an application thread
     * may answer one while this runs (fabrpc.h), also one that a future's
     * callback run by fr_fabric_close below lets go; they are freed last. */
    atomic_store(&a->answers_closed, 1);
    if (fr_fault_hit(FR_FAULT_ANSWERS_CLOSED_LATE))
        fault_wait_kept_answered(a);
    wait_users(a, deadline);
    fr_mem_end_all(a); /* before the domain closes */
    stop_shm_guard(a); /* before the regions it repairs are unmapped */
    fr_fabric_close(a->fab);
    fr_doorbell_close(a->bell);
    fr_store_close(a->store);
    fr_store_server_stop(a->store_srv);
    fr_backends_free(&a->backends);
    fr_pending_destroy(&a->pend);
    if (a->dedup_on)
        fr_dedup_destroy(&a->dedup);
    fr_liveness_destroy(a);
    fr_progress_free(a); /* after wait_users: no caller signals it now */
    pthread_mutex_destroy(&a->store_lock);
    release_kept_requests(a);
    fr_registry_destroy(&a->reg);   /* kept requests point into them */
    fr_fnstats_destroy(&a->fnstats);
    pthread_mutex_destroy(&a->req_lock);
    pthread_mutex_destroy(&a->mem_lock);
    fr_notify_free_all(a);
    pthread_mutex_destroy(&a->notify_lock);
    pthread_cond_destroy(&a->notify_done);
    free(a);
}

static int init_held(const frpc_config *cfg, frpc_agent **out)
{
    frpc_config defaults;
    char local_err[1024] = "";
    char *err = local_err;
    size_t errlen = sizeof(local_err);
    frpc_agent *a;
    fr_peer_info *peers = NULL;
    uint64_t deadline = 0; /* of the whole of frpc_init (init_timeout_ms) */
    int rc;

    fr_signals_default();
    if (out)
        *out = NULL;
    if (fr_config_adopt(cfg, &defaults))
        return FRPC_EINVAL; /* size: not made by frpc_config_init */
    cfg = &defaults;
    if (cfg->errbuf && cfg->errbuf_len) {
        err = cfg->errbuf;
        errlen = cfg->errbuf_len;
        err[0] = '\0';
    }
    if (!out) { /* like every other failure, say so in errbuf */
        say(err, errlen, "frpc_init: out is NULL (it receives the agent)");
        return FRPC_EINVAL;
    }
    a = calloc(1, sizeof(*a));
    if (!a) {
        say(err, errlen, "frpc_init: out of memory for the agent");
        return FRPC_ENOMEM;
    }
    pthread_mutex_init(&a->store_lock, NULL);
    pthread_mutex_init(&a->req_lock, NULL);
    pthread_mutex_init(&a->mem_lock, NULL);
    pthread_mutex_init(&a->notify_lock, NULL);
    pthread_cond_init(&a->notify_done, NULL);
    fr_fnstats_init(&a->fnstats);
    if ((rc = fr_registry_init(&a->reg)) || (rc = fr_notify_register(a)) ||
        (rc = fr_fence_register(a)) ||
        (rc = fr_dropped_register(a)) ||
        (rc = fr_emu_register(a)) ||
        (rc = fr_pending_init(&a->pend)))
        goto fail;
    if ((rc = fr_settings_resolve(cfg, &a->set, err, errlen))) {
        if (a->set.rank_outside)
            tell_rank_outside(a, err, errlen);
        goto fail;
    }
    a->pend.limit = a->set.max_inflight;
    deadline = fr_deadline_ms(a->set.init_timeout_ms);
    fr_fd_limit_for_world(a->set.world, a->set.rank);
    if (a->set.alone_by_default) /* started by hand, perhaps by mistake */
        fprintf(stderr, "fabrpc: no rank set (config, FABRPC_RANK, RANK, "
                "OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID): running as "
                "rank 0 of 1\n");
    if ((rc = fr_liveness_create(a)) ||
        !(peers = calloc((size_t)a->set.world, sizeof(*peers)))) {
        rc = FRPC_ENOMEM;
        goto fail;
    }
    if ((rc = fr_liveness_register(a)))
        goto fail;
    const char *no_fabric;
    if (fr_fi_load(&no_fabric)) {
        say(err, errlen, "cannot load libfabric (%s): %s",
            FR_LIBFABRIC_SONAME, no_fabric ? no_fabric : "unknown error");
        rc = FRPC_ENOBACKEND;
        goto fail;
    }
    rc = fr_backends_discover(&a->backends,
                              a->set.providers[0] ? a->set.providers : NULL);
    if (rc) {
        if (rc == FRPC_ENOMEM)
            say(err, errlen, "out of memory listing libfabric's providers");
        else if (rc == FRPC_ETOOBIG)
            say(err, errlen, "provider list \"%s\" names more than %d "
                "providers", a->set.providers, FR_BACKEND_MAX);
        else
            say(err, errlen, "malformed provider list \"%s\"",
                a->set.providers);
        if (rc == FRPC_ETOOBIG)
            rc = FRPC_EINVAL;
        goto fail;
    }
    for (int i = 0; i < a->backends.n; i++)
        if (a->backends.b[i].unknown) { /* a typo: never fall back quietly */
            say(err, errlen, "provider list \"%s\": %s", a->set.providers,
                a->backends.b[i].reason);
            rc = FRPC_EINVAL;
            goto fail;
        }
    if (a->set.strict &&
        (rc = fr_backends_check_strict(&a->backends, err, errlen)))
        goto fail;
    char up[512];
    if (fr_backends_up_list(&a->backends, up, sizeof(up)) == 0) {
        char rep[768];
        fr_backends_report(&a->backends, NULL, rep, sizeof(rep));
        say(err, errlen, "no usable libfabric provider on this rank:\n%s",
            rep);
        rc = FRPC_ENOBACKEND;
        goto fail;
    }
    /* With 2 threads or more a handler's wait adds one when none would
     * be free (fabrpc.h, config.threads); with 1, handlers run one at a
     * time, as the user asked. */
    unsigned grow_to = a->set.threads >= 2 ? FR_POOL_MAX_THREADS : 1;
    if ((rc = fr_pool_create_growing(a->set.threads, grow_to,
                                     a->set.queue_len, &a->pool))) {
        say(err, errlen, "cannot start %u pool threads", a->set.threads);
        goto fail;
    }
    if ((rc = bootstrap(a, deadline, peers, err, errlen)))
        goto fail;
    fr_liveness_set_peers(a, peers);
    /* Everything a rank may fail to get is got before the barrier, so
     * that no rank returns 0 while another then fails. */
    if (!(rc = fr_liveness_connect(a, peers, deadline, err, errlen)) &&
        !(rc = fr_liveness_start(a))) {
        stop_shm_guard(a); /* the liveness thread watches from now on */
        rc = fr_progress_start(a);
    }
    if (rc) {
        if (rc == FRPC_ENOMEM && !err[0])
            say(err, errlen, "rank %d: cannot start its threads",
                a->set.rank);
        goto fail;
    }
    if (a->set.world > 1 && (rc = barrier(a, left_ms(deadline)))) {
        /* The store's guess at a timeout ("rank 0 stopped?") is no news
         * to rank 0, which serves it. */
        const char *why = a->store_srv ? "" : store_why(a);
        if (rc == FRPC_ETIMEDOUT)
            say(err, errlen, "rank %d: not every rank joined within %d ms%s%s",
                a->set.rank, a->set.init_timeout_ms, *why ? ": " : "", why);
        else /* a death or the store's loss, not the clock */
            say_job_broke(a, rc, err, errlen);
        rc = rc == FRPC_EPEERLOST ? rc : FRPC_EBOOTSTRAP;
        goto fail;
    }
    if ((rc = connect_doorbells(a, deadline, err, errlen)))
        goto fail;
    /* Every rank has mapped this rank's shm region by now (it sent to it
     * before the barrier; a lock repair finds it in its own maps): its
     * name goes, the mappings stay until the endpoints close. A rank
     * killed from here on, or a whole job killed at once (a world of 1
     * without a launcher), leaves nothing in /dev/shm. (The doorbell's
     * name went in connect_doorbells.) */
    if (!fr_fault_hit(FR_FAULT_SHM_NAME_KEPT))
        fr_fabric_unlink_name(a->fab);
    fr_liveness_open(a);
    free(peers);
    fr_store_cap(a->store, 0);
    *out = a;
    return 0;
fail:
    stop_shm_guard(a);
    /* A late barrier's and a garbled store value's codes, as listed. */
    if (rc == FRPC_ETIMEDOUT || rc == FRPC_EPROTO)
        rc = FRPC_EBOOTSTRAP;
    /* A rank that leaves during frpc_init gave its own up (its timeout,
     * a refusal): the job did not start, nobody died. */
    if (rc == FRPC_EPEERLOST && fr_store_lost_by_leave(store_why(a))) {
        rc = FRPC_EBOOTSTRAP;
        size_t n = strlen(err);
        if (n + 1 < errlen)
            snprintf(err + n, errlen - n, " (its own frpc_init failed)");
    }
    clean_after_dead_peers(a, peers, rc);
    free(peers);
    if (!err[0]) /* every failure says something (out of memory, mostly) */
        say(err, errlen, "rank %d: frpc_init failed: %s", a->set.rank,
            frpc_strerror(rc));
    /* The others learn that this rank gave up, not that it died. */
    if (a->store) {
        /* well within a second, also while rank 0 is stopped (it may not
         * answer): destroy needs the rest */
        fr_store_cap(a->store, (int64_t)(fr_deadline_ms(500) / 1000000u));
        fr_store_leave(a->store);
    }
    linger_store(a, deadline);
    destroy(a, fr_deadline_ms(1000));
    return rc;
}

/* The caller's thread sets up libfabric's providers, endpoints and
 * regions: it holds the asynchronous signals off except while it waits
 * for the others (comm/signal_hold.h), so that a handler calling exit()
 * never interrupts it inside libfabric, malloc or a lock of ours. */
int frpc_init(const frpc_config *cfg, frpc_agent **out)
{
    fr_hold_begin();
    int rc = init_held(cfg, out);
    fr_hold_end();
    return rc;
}

/* Bounds the store's operations by deadline (UINT64_MAX: none) as well
 * as by their own bounds, so that a barrier keeps to its timeout while
 * rank 0, which serves the store, is stopped and answers nothing. Returns
 * the bound it replaced, for fr_store_cap. */
static int64_t cap_store(frpc_agent *a, uint64_t deadline)
{
    int64_t old = fr_store_cap(a->store, 0);
    int64_t cap = deadline == UINT64_MAX ? 0
                                         : (int64_t)(deadline / 1000000u);
    fr_store_cap(a->store, cap && (!old || cap < old) ? cap : old);
    return old;
}

/* A barrier with a rank known lost would never complete. */
static int any_rank_lost(frpc_agent *a)
{
    for (int r = 0; r < a->set.world; r++)
        if (fr_agent_peer_lost_why(a, (uint32_t)r))
            return 1;
    return 0;
}

/* The barrier, timeout_ms as the store takes it (<= 0: no limit). A rank
 * known lost would never come: fail at once. shutdown: frpc_shutdown's,
 * under a key of its own, so that an application's barrier that another
 * thread left unfinished (FRPC_ESHUTDOWN) cannot be taken for it. */
static int barrier_for(frpc_agent *a, int timeout_ms, int shutdown)
{
    char key[64];
    int rc;
    if (a->set.world == 1)
        return 0;
    if (any_rank_lost(a))
        return FRPC_EPEERLOST;
    pthread_mutex_lock(&a->store_lock);
    if (shutdown)
        snprintf(key, sizeof(key), "barrier/shutdown");
    else
        snprintf(key, sizeof(key), "barrier/%llu",
                 (unsigned long long)a->barrier_gen++);
    int64_t old = cap_store(a, fr_deadline_ms(timeout_ms <= 0 ? -1
                                                              : timeout_ms));
    rc = fr_store_barrier(a->store, key, a->set.world, timeout_ms);
    fr_store_cap(a->store, old);
    pthread_mutex_unlock(&a->store_lock);
    return rc;
}

static int barrier(frpc_agent *a, int timeout_ms)
{
    return barrier_for(a, timeout_ms, 0);
}

/* How often an application's barrier looks up from the store: it gives
 * way to frpc_shutdown (whose own barrier needs the store) within this. */
#define FR_BARRIER_SLICE_MS 100
#define FR_BARRIER_FAR_NS (3650ull * 86400 * 1000000000) /* ten years */

/* Takes the store for frpc_barrier: another thread's barrier may hold it,
 * but not past our deadline, nor once shutdown began. */
static int lock_store_for_user(frpc_agent *a, uint64_t deadline)
{
    for (;;) {
        struct timespec ts;
        /* Never a whole slice past the deadline: a 10 ms barrier behind
         * another thread's had waited 100. */
        int slice = FR_BARRIER_SLICE_MS;
        if (deadline != UINT64_MAX && left_ms(deadline) < slice)
            slice = left_ms(deadline);
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += slice * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        if (pthread_mutex_timedlock(&a->store_lock, &ts) == 0) {
            /* Given up by a barrier that shutdown ended: this one waited
             * its turn and enters nothing (it had entered the next
             * barrier, which the others then met without this rank). */
            if (!atomic_load(&a->shutting_down))
                return 0;
            pthread_mutex_unlock(&a->store_lock);
            return FRPC_ESHUTDOWN;
        }
        if (atomic_load(&a->shutting_down))
            return FRPC_ESHUTDOWN;
        if (fr_now_ns() >= deadline)
            return FRPC_ETIMEDOUT;
    }
}

/* How long a barrier that ran out may take past its timeout to take its
 * entry back (a round trip to the store; rank 0 stopped: this long). */
#define FR_BARRIER_TAKE_BACK_MS 500

/* A barrier that ran out takes its entry back, so that the ranks stay in
 * step: this rank's next frpc_barrier is this barrier again (a loop that
 * retries on FRPC_ETIMEDOUT pairs with the others' first). If the others
 * had all arrived meanwhile it did complete: the store keeps the entry
 * and says so (fr_store_unarrive: one step there, so that two ranks
 * taking back at once after the last arrival both see it complete; with
 * an ADD of -1 and a check the second saw world - 2), and 0.
 * A take-back that went out unanswered (rank 0 stopped) is applied when
 * the store resumes, if the barrier has not completed by then; one that
 * could not go out leaves the entry, which the next barrier then waits
 * on without arriving again (barrier_kept).
 * Under store_lock, which barrier_gen's every change holds. */
static int take_back(frpc_agent *a, const char *key, int added)
{
    int64_t n = 0;
    if (!added) { /* the arrival never went out */
        a->barrier_gen--; /* the next barrier is this one */
        return FRPC_ETIMEDOUT;
    }
    int64_t old = cap_store(a, fr_deadline_ms(FR_BARRIER_TAKE_BACK_MS));
    int rc = fr_store_unarrive(a->store, key, a->set.world, &n);
    fr_store_cap(a->store, old);
    if (rc == 0 && n >= a->set.world)
        return 0; /* it had completed */
    a->barrier_gen--; /* the next barrier is this one, whatever follows */
    if (rc != 0)
        a->barrier_kept = !fr_store_last_sent(a->store);
    return FRPC_ETIMEDOUT;
}

/* frpc_barrier's: as barrier(), waiting in slices so that it ends
 * FRPC_ESHUTDOWN once frpc_shutdown begins on another thread (its count
 * stays in the store then: the others' barrier completes as if it
 * waited), and taking its entry back when it runs out (take_back). */
static int user_barrier(frpc_agent *a, int timeout_ms)
{
    char key[64];
    if (a->set.world == 1)
        return 0;
    if (any_rank_lost(a))
        return FRPC_EPEERLOST;
    uint64_t deadline = fr_deadline_ms(timeout_ms <= 0 ? -1 : timeout_ms);
    int rc = lock_store_for_user(a, deadline);
    if (rc)
        return rc;
    snprintf(key, sizeof(key), "barrier/%llu",
             (unsigned long long)a->barrier_gen++);
    /* A timed-out barrier's entry that could not be taken back counts
     * for this one (take_back). */
    int added = a->barrier_kept;
    a->barrier_kept = 0;
    /* Always a cap, far off without a timeout: a slice that the store
     * leaves unanswered (rank 0 stopped) is then asked again, not taken
     * for a lost store. */
    int64_t old = cap_store(a, deadline != UINT64_MAX
                                   ? deadline
                                   : fr_now_ns() + FR_BARRIER_FAR_NS);
    /* This rank's count goes with its first wait (fr_store_arrive: no
     * other rank's arrival between them); until it went out (a stopped
     * store still owed replies), each slice tries again. */
    while (rc == 0) {
        int slice = FR_BARRIER_SLICE_MS;
        if (deadline != UINT64_MAX && left_ms(deadline) < slice)
            slice = left_ms(deadline);
        rc = added ? fr_store_wait_ge(a->store, key, a->set.world, slice)
                   : fr_store_arrive(a->store, key, a->set.world, slice,
                                     &added);
        if (rc != FRPC_ETIMEDOUT)
            break;
        if (atomic_load(&a->shutting_down))
            rc = FRPC_ESHUTDOWN;
        else if (fr_now_ns() < deadline)
            rc = 0;
    }
    fr_store_cap(a->store, old);
    if (rc == FRPC_ETIMEDOUT)
        rc = take_back(a, key, added);
    pthread_mutex_unlock(&a->store_lock);
    return rc;
}

int frpc_barrier(frpc_agent *a, int timeout_ms)
{
    if (!a)
        return FRPC_EINVAL;
    if (atomic_load(&a->shutting_down))
        return FRPC_ESHUTDOWN;
    /* On the polling thread (an inline handler, a callback it runs) no
     * request would be served while the barrier waits. */
    if (fr_fabric_polling_here(a->fab))
        return FRPC_EDEADLK;
    fr_agent_enter(a);
    /* On the pool, as a nested call: one pool thread stays free to run
     * handlers (with threads 1, none would while the barrier waits).
     * Inside enter/leave: shutdown frees the pool once we left. */
    int rc = FRPC_EDEADLK;
    if (!fr_pool_block(a->pool)) {
        rc = user_barrier(a, fr_agent_timeout(a, timeout_ms));
        fr_pool_unblock(a->pool);
    }
    fr_agent_leave(a);
    return rc;
}

/* How long rank 0 waits for its own LEAVE past shutdown's deadline; and
 * how long an immediate shutdown waits for its LEAVE's answer at most
 * (a store that is stopped reads the LEAVE when it resumes, before the
 * connection's end: LEFT all the same). */
#define OWN_LEAVE_MS 500

/* Tells the store this rank leaves (so nobody takes it for dead). Rank 0
 * serves the store: after a graceful shutdown it stays until every other
 * rank has left it or is lost, or deadline, so that no rank loses the
 * store in the middle of its last barrier. FRPC_ETIMEDOUT if the deadline
 * came first (a rank stopped after the barrier), else 0. */
static int leave_store(frpc_agent *a, int wait_others, uint64_t deadline)
{
    if (fr_fault_hit(FR_FAULT_SHUTDOWN_DIES))
        _exit(9);
    if (!a->store)
        return 0;
    pthread_mutex_lock(&a->store_lock);
    if (!wait_others && deadline > fr_deadline_ms(OWN_LEAVE_MS))
        deadline = fr_deadline_ms(OWN_LEAVE_MS); /* immediate: at once */
    if (deadline != UINT64_MAX) {
        /* Rank 0's LEAVE goes to its own server thread, which answers at
         * once, and the store closes right after: one not read by then
         * is lost, and a rank stopped meanwhile, resumed, finds rank 0
         * DEAD (its goodbye may wait behind data on a stopped rank's
         * connection). So it is waited for past the deadline too. */
        uint64_t least = a->store_srv ? fr_deadline_ms(OWN_LEAVE_MS) : 0;
        fr_store_cap(a->store, (int64_t)((deadline > least ? deadline : least) /
                                         1000000u));
    }
    fr_store_leave(a->store);
    fr_store_cap(a->store, 0);
    pthread_mutex_unlock(&a->store_lock);
    if (!a->store_srv || !wait_others)
        return 0;
    return fr_store_server_wait_gone(a->store_srv, deadline == UINT64_MAX
                                                       ? INT32_MAX
                                                       : left_ms(deadline));
}

/* Waits until this rank's own calls have ended (they end by their own
 * deadlines, or as their peers are lost) or deadline. 1 if they have. */
static int drain(frpc_agent *a, uint64_t deadline)
{
    while (atomic_load(&a->pend.inflight)) {
        if (fr_now_ns() >= deadline)
            return 0;
        fr_hold_poll(NULL, 0, 1); /* 1 ms; a signal held off comes in */
    }
    return 1;
}

/* This rank (not 0) lost the store in its shutdown barrier: rank 0, the
 * store's process, is gone. Its watcher learns it through its own
 * connection, and learns whether rank 0 left first: its word is waited for
 * until deadline (a second at most), else rank 0 is marked DEAD here.
 * Returns FRPC_EPEERLOST. */
static int store_lost(frpc_agent *a, uint64_t deadline)
{
    uint64_t until = fr_deadline_ms(1000);
    until = deadline < until ? deadline : until;
    while (!fr_agent_peer_lost_why(a, 0) && fr_now_ns() < until) {
        fr_hold_poll(NULL, 0, 1); /* 1 ms; a signal held off comes in */
    }
    fr_agent_mark_lost(a, 0, FRPC_PEER_DEAD,
                       "died (the bootstrap store it served closed)");
    return FRPC_EPEERLOST;
}

/* Before a graceful shutdown's goodbye, which ends the others' calls to
 * this rank at once (no store is left to carry a LEAVE after the last
 * answers): new requests are refused (the caller's call ends
 * FRPC_EPEERLOST), and the handlers running finish first, and the
 * callers read the answers sent by rendezvous (read from this rank after
 * the handler returned: a goodbye first ended the call, run_peer_lost's
 * large answers over sockets and udp), and the sends complete, so that
 * their answers arrive before it. At most half a second, whatever
 * timeout_ms: a shutdown whose time ran out in its barrier (timeout_ms
 * 1, a rank slow to arrive) ended 16 MB answers being read FRPC_EPEERLOST
 * 20 times in 20 over tcp. An answer a handler deferred to another
 * thread can still come after it. */
static void quiet_before_goodbye(frpc_agent *a)
{
    uint64_t until = fr_deadline_ms(500);
    atomic_store(&a->refusing, 1);
    while ((atomic_load(&a->handling) > 0 ||
            fr_fabric_payloads_unread(a->fab)) &&
           fr_now_ns() < until) {
        fr_hold_poll(NULL, 0, 1); /* 1 ms; a signal held off comes in */
    }
    if (a->fab)
        fr_fabric_flush(a->fab, until);
}

/* An immediate shutdown holds no barrier that would tell whether every
 * rank heard of its leaving: one stopped meanwhile may resume once the
 * store, and the LEAVE it held, are gone, so the leaving is announced
 * (fr_liveness_say_goodbye_by). The calls in flight end first, at once
 * as the header promises, not after the announcement's wait; only this
 * thread's announcement passes the shutdown's refusal. */
static void announce_immediate_leaving(frpc_agent *a, uint64_t deadline)
{
    fr_pending_fail(&a->pend, UINT32_MAX, FRPC_ESHUTDOWN,
                    FR_SHUT_BEFORE_ANSWER);
    fr_call_shutdown_own(1);
    fr_liveness_say_goodbye_by(a, deadline, 1);
    fr_call_shutdown_own(0);
}

static int shutdown_held(frpc_agent *a, int how, int timeout_ms);

/* As frpc_init: the caller's thread closes libfabric's endpoints and
 * regions, with the asynchronous signals held off except while it waits
 * (comm/signal_hold.h). */
int frpc_shutdown(frpc_agent *a, int how, int timeout_ms)
{
    fr_hold_begin();
    int rc = shutdown_held(a, how, timeout_ms);
    fr_hold_end();
    return rc;
}

static int shutdown_held(frpc_agent *a, int how, int timeout_ms)
{
    int rc = 0;
    if (!a || (how != FRPC_SHUTDOWN_GRACEFUL && how != FRPC_SHUTDOWN_IMMEDIATE))
        return FRPC_EINVAL;
    /* A thread of the agent's own (a handler, a callback), or one inside
     * a call on it, would wait for itself to end. */
    if (fr_agent_is_inside(a) || fr_agent_runs_handlers(a))
        return FRPC_EDEADLK;
    /* One shutdown per agent: a second, from another thread while the
     * first runs, would free what the first still uses. */
    int idle = 0;
    if (!atomic_compare_exchange_strong(&a->shutting_down, &idle, how + 1))
        return FRPC_ESHUTDOWN;
    uint64_t deadline = fr_agent_deadline(a, timeout_ms);
    if (how == FRPC_SHUTDOWN_GRACEFUL) {
        /* Our own calls finish first (async ones in flight), then we keep
         * serving until every rank is here. */
        if (!drain(a, deadline))
            rc = FRPC_ETIMEDOUT;
        int b = barrier_for(a, left_ms(deadline), 1);
        if (b == FRPC_EBOOTSTRAP && a->set.rank != 0)
            b = store_lost(a, deadline);
        if (b == FRPC_EPEERLOST)
            rc = b;
        else if (b && !rc) /* the store's own failures: ENOMEM, EPROTO */
            rc = b == FRPC_ETIMEDOUT ? b : FRPC_EBOOTSTRAP;
        if (b || fr_agent_peer_lost_why(a, 0)) {
            /* Rank 0 was lost since the goodbye above, or a rank missed
             * the barrier (stopped?) and may find the store gone when it
             * resumes: say it now (announce it, in the second case), or
             * the others take our end for a death. Only this thread's
             * calls pass the shutdown's refusal meanwhile. */
            fr_call_shutdown_own(1);
            quiet_before_goodbye(a);
            fr_liveness_say_goodbye_by(a, deadline, b != 0);
            fr_call_shutdown_own(0);
        }
        fr_progress_stop(a);
    } else {
        announce_immediate_leaving(a, deadline);
    }
    end_calls(a); /* graceful: those still in flight past the drain */
    fr_liveness_stop(a);
    if (rc == FRPC_EPEERLOST && !fr_liveness_report_lost(a, "shut down"))
        fprintf(stderr, "fabrpc: rank %d: shut down without a lost rank: "
                "%s\n", a->set.rank, store_why(a));
    /* What we answered reaches the peers before they learn we left. */
    if (a->fab && how == FRPC_SHUTDOWN_GRACEFUL)
        fr_fabric_flush(a->fab, deadline < fr_deadline_ms(1000)
                                    ? deadline
                                    : fr_deadline_ms(1000));
    /* Graceful: the time ran out if rank 0's wait for the others to
     * leave its store did (it returned 0 there). */
    if (leave_store(a, how == FRPC_SHUTDOWN_GRACEFUL, deadline) &&
        rc == 0)
        rc = FRPC_ETIMEDOUT;
    destroy(a, deadline); /* immediate: in flight ends FRPC_ESHUTDOWN */
    return rc;
}

int frpc_rank(const frpc_agent *a) { return a ? a->set.rank : FRPC_EINVAL; }

int frpc_world_size(const frpc_agent *a)
{
    return a ? a->set.world : FRPC_EINVAL;
}

const char *frpc_provider(const frpc_agent *a) { return a ? a->provider : ""; }

const char *frpc_provider_full(const frpc_agent *a)
{
    return a ? a->provider_full : "";
}

int frpc_has_backend(const frpc_agent *a, const char *name)
{
    const fr_backend *b = a ? fr_backends_find(&a->backends, name) : NULL;
    return b && b->up;
}

int frpc_require_backend(const frpc_agent *a, const char *name)
{
    if (!a || !name)
        return FRPC_EINVAL;
    return strcmp(a->provider, name) == 0 ? 0 : FRPC_ENOBACKEND;
}

size_t frpc_backend_report(const frpc_agent *a, char *buf, size_t len)
{
    if (!a)
        return 0;
    size_t n = fr_backends_report(&a->backends, a->provider, buf, len);
    int w = fr_emu_report(a, buf && n < len ? buf + n : NULL,
                          buf && n < len ? len - n : 0);
    return n + (w > 0 ? (size_t)w : 0);
}

/* The first frpc_stats (ABI 1, tests/abi/1.0/fabrpc.h) ended with
 * cq_errors_unmatched: 22 fields, 176 bytes (frames_coalesced, which this
 * once named, left sizes 160-175 accepted). */
#define FR_STATS_V1_SIZE (offsetof(frpc_stats, cq_errors_unmatched) + 8)

int frpc_get_stats_sized(const frpc_agent *a, frpc_stats *out, size_t size)
{
    fr_fabric_stats fs = {0};
    frpc_stats all, *o = &all;
    if (!a || !out || size < FR_STATS_V1_SIZE || size > FR_SIZED_MAX)
        return FRPC_EINVAL;
    frpc_agent *m = (frpc_agent *)a;
    memset(o, 0, sizeof(*o));
    o->calls_started = fr_pending_started(&m->pend);
    o->calls_ok = atomic_load(&m->pend.st.ok);
    o->calls_remote_error = atomic_load(&m->pend.st.remote);
    o->calls_timed_out = atomic_load(&m->pend.st.timed_out);
    o->calls_cancelled = atomic_load(&m->pend.st.cancelled);
    o->calls_failed = atomic_load(&m->pend.st.failed);
    o->calls_in_flight = atomic_load(&m->pend.inflight);
    o->answers_dropped = atomic_load(&m->pend.st.dropped);
    o->requests_received = atomic_load(&m->requests_received);
    o->requests_answered = atomic_load(&m->requests_answered);
    if (m->fab)
        fr_fabric_get_stats(m->fab, &fs);
    o->answers_dropped += fs.rndv_unread_late; /* dropped unread */
    o->frames_malformed = fs.dropped_malformed;
    o->frames_bad_token = fs.dropped_token;
    o->frames_stranger = fs.dropped_stranger;
    o->frames_oversize = fs.dropped_oversize;
    o->frames_from_lost = fs.dropped_lost;
    for (int r = 0; r < m->set.world; r++)
        o->peers_lost += fr_agent_peer_lost_why(m, (uint32_t)r) != NULL;
    o->bytes_sent = fs.bytes_sent;
    o->bytes_received = fs.bytes_received;
    o->messages_sent = fs.messages;
    o->frames_coalesced = fs.coalesced;
    o->recv_repost_failed = fs.recv_repost_failed;
    o->cq_errors_unmatched = fs.cq_errors_unmatched;
    o->transfers_get = atomic_load(&m->xfer_get);
    o->transfers_put = atomic_load(&m->xfer_put);
    o->transfer_bytes = fs.rma_bytes + atomic_load(&m->emu_bytes);
    o->transfers_refused = atomic_load(&m->xfer_refused);
    o->mem_registered = atomic_load(&m->mem_registered);
    o->transfer_batches = atomic_load(&m->xfer_batches);
    o->notifications_sent = atomic_load(&m->notes_sent);
    o->notifications_received = atomic_load(&m->notes_received);
    o->notifications_refused = atomic_load(&m->notes_refused);
    o->zerocopy_sent = fs.rndv_lent;
    o->requests_duplicate = atomic_load(&m->requests_duplicate);
    o->handlers_on_progress = atomic_load(&m->handlers_on_progress);
    o->progress_stand_ins = atomic_load(&m->progress_stand_ins);
    /* The program's struct may be older (smaller) or newer (the bytes we
     * do not know of: zero). */
    memset(out, 0, size);
    memcpy(out, o, size < sizeof(*o) ? size : sizeof(*o));
    return 0;
}

/* The size of the first frpc_fn_stats (1.4). */
#define FR_FN_STATS_V1_SIZE (offsetof(frpc_fn_stats, handle_ns_p99) + 8)
_Static_assert(sizeof(frpc_stats) <= FR_SIZED_MAX, "room to grow");
_Static_assert(sizeof(frpc_fn_stats) <= FR_SIZED_MAX, "room to grow");

int frpc_get_fn_stats_sized(const frpc_agent *a, const char *name,
                            frpc_fn_stats *out, size_t size)
{
    size_t nlen = name ? strlen(name) : 0;
    if (!a || !out || nlen == 0 || nlen > FR_FUNC_NAME_MAX ||
        size < FR_FN_STATS_V1_SIZE || size > FR_SIZED_MAX)
        return FRPC_EINVAL;
    frpc_fn_stats all;
    fr_fnstats_fill(fr_fnstats_find(&a->fnstats, name), &all);
    memset(out, 0, size);
    memcpy(out, &all, size < sizeof(all) ? size : sizeof(all));
    return 0;
}

int frpc_fn_stats_names(const frpc_agent *a, const char **names, int max)
{
    if (!a || max < 0 || (!names && max > 0))
        return FRPC_EINVAL;
    int n = atomic_load_explicit(&((frpc_agent *)a)->fnstats.count,
                                 memory_order_acquire);
    for (int i = 0; i < n && i < max; i++)
        names[i] = a->fnstats.order[i]->name;
    return n;
}

int frpc_batch_begin(frpc_agent *a)
{
    if (!a || !a->fab)
        return FRPC_EINVAL;
    atomic_fetch_add(&a->batch_depth, 1);
    fr_fabric_poller_enter(a->fab);
    return 0;
}

int frpc_batch_end(frpc_agent *a)
{
    if (!a || !a->fab)
        return FRPC_EINVAL;
    int depth = atomic_load(&a->batch_depth);
    do {
        if (depth <= 0)
            return FRPC_EINVAL; /* no frpc_batch_begin to end */
    } while (!atomic_compare_exchange_weak(&a->batch_depth, &depth,
                                           depth - 1));
    fr_fabric_poller_leave(a->fab);
    return 0;
}

int frpc_register(frpc_agent *a, const char *name, frpc_handler_fn handler,
                  void *user, unsigned flags)
{
    if (!a || !name || (flags & ~FRPC_INLINE))
        return FRPC_EINVAL;
    if (strncmp(name, FR_RESERVED_PREFIX, strlen(FR_RESERVED_PREFIX)) == 0)
        return FRPC_EINVAL; /* fabrpc's own functions */
    if (atomic_load(&a->shutting_down))
        return FRPC_ESHUTDOWN;
    uint64_t id = fr_func_id(name);
    int rc = fr_registry_add(&a->reg, id, name, handler, user, flags);
    if (rc == 0 && a->set.fn_stats) /* listed before its first request */
        fr_fnstats_get(&a->fnstats, id, name);
    return rc;
}
