/*
 * Provider discovery and choice. See providers.h.
 */
#include "config.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <rdma/fi_errno.h>

#include "comm/providers.h"

static int has_name(char names[][FR_BACKEND_NAME], int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0)
            return 1;
    return 0;
}

/* An element of a user's list that names no provider, kept as written
 * (too long: its start and "...") so that it reaches the user as an
 * unknown provider, named, rather than being dropped or failing the
 * whole list without saying which. */
static void keep_as_written(char *out, const char *s, size_t len)
{
    if (len < FR_BACKEND_NAME) {
        memcpy(out, s, len);
        out[len] = '\0';
    } else {
        memcpy(out, s, FR_BACKEND_NAME - 4);
        strcpy(out + FR_BACKEND_NAME - 4, "...");
    }
}

static int parse(const char *list, char names[][FR_BACKEND_NAME], int max,
                 int keep_bad)
{
    int n = 0;
    const char *p = list;

    if (!list || !names || max <= 0)
        return FRPC_EINVAL;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *s = p, *e = p + len;
        p = end ? end + 1 : p + len;
        while (s < e && isspace((unsigned char)*s))
            s++;
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
        size_t whole = (size_t)(e - s); /* >= 0: e never passes s */
        const char *semi = memchr(s, ';', whole);
        if (semi)
            e = semi; /* "tcp;ofi_rxm" names the core provider "tcp" */
        char name[FR_BACKEND_NAME];
        if (keep_bad && whole &&
            (e == s || *s == '^' || (size_t)(e - s) >= FR_BACKEND_NAME)) {
            keep_as_written(name, s, whole);
            if (has_name(names, n, name))
                continue;
            if (n == max)
                return FRPC_ETOOBIG;
            strcpy(names[n++], name);
            continue;
        }
        if (e == s || *s == '^')
            continue;
        if ((size_t)(e - s) >= FR_BACKEND_NAME)
            return FRPC_EINVAL;
        /* libfabric's names are lower case and it matches any case */
        for (size_t i = 0; i < (size_t)(e - s); i++)
            name[i] = (char)tolower((unsigned char)s[i]);
        name[e - s] = '\0';
        if (has_name(names, n, name))
            continue;
        if (n == max) /* not dropped unread: it may be a typo */
            return FRPC_ETOOBIG;
        strcpy(names[n++], name);
    }
    return n > 0 ? n : FRPC_EINVAL;
}

int fr_backends_parse(const char *list, char names[][FR_BACKEND_NAME],
                      int max)
{
    return parse(list, names, max, 0);
}

/* rma: ask for RMA (always, but for the question below: why did a
 * provider not come up?). */
static struct fi_info *make_hints(int rma)
{
    struct fi_info *h = fi_allocinfo();
    if (!h)
        return NULL;
    h->caps = FI_MSG;
    if (rma)
        h->caps |= FI_RMA | FI_READ | FI_REMOTE_READ | FI_WRITE |
                   FI_REMOTE_WRITE;
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->ep_attr->type = FI_EP_RDM;
    h->domain_attr->threading = FI_THREAD_SAFE;
    /* Registration modes rndv.c handles; FI_MR_LOCAL is not among them
     * (eager buffers are posted without descriptors). */
    h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
                              FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    return h;
}

/* Does libfabric's provider name ("tcp;ofi_rxm") have core provider name? */
static int core_is(const char *prov_name, const char *name)
{
    size_t n = strlen(name);
    return prov_name && strncmp(prov_name, name, n) == 0 &&
           (prov_name[n] == '\0' || prov_name[n] == ';');
}

/* Core provider names libfabric 1.x has had: a name outside this list is
 * a typo, not a provider missing here. */
static const char *const libfabric_names[] = {
    "shm", "tcp", "udp", "sockets", "verbs", "efa", "psm", "psm2", "psm3",
    "opx", "cxi", "usnic", "gni", "ucx", "lnx", "sm2", "net", "rxm", "rxd",
    "mrail", "bgq", "netdir"};

static int libfabric_knows(const char *name)
{
    for (size_t i = 0; i < sizeof(libfabric_names) / sizeof(*libfabric_names);
         i++)
        if (strcmp(name, libfabric_names[i]) == 0)
            return 1;
    return 0;
}

/* "shm, tcp, ...": the core names in all (each once), into buf. */
static void came_up(const struct fi_info *all, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (const struct fi_info *fi = all; fi; fi = fi->next) {
        char core[FR_BACKEND_NAME];
        const char *p = fi->fabric_attr->prov_name;
        size_t n = p ? strcspn(p, ";") : 0;
        if (!n || n >= sizeof(core))
            continue;
        memcpy(core, p, n);
        core[n] = '\0';
        const struct fi_info *seen = all;
        while (seen != fi && !core_is(seen->fabric_attr->prov_name, core))
            seen = seen->next;
        if (seen != fi)
            continue; /* named already */
        int w = snprintf(buf + at, len - at, "%s%s", at ? ", " : "", core);
        if (w < 0 || (size_t)w >= len - at)
            break;
        at += (size_t)w;
    }
}

/* Every provider's fi_info. The first call loads them all (a noticeable
 * part of a second) under libfabric's init lock, which its destructor
 * takes too: frpc_init, the library's caller, runs it with the
 * asynchronous signals held off (signal_hold.h). */
static int getinfo_all(struct fi_info *hints, struct fi_info **all)
{
    return fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, all);
}

/* One fi_getinfo for all providers: each call rescans them all, which
 * costs a noticeable part of a second. */
/* Whether libfabric 1.17 reads list (FI_PROVIDER's, after any "^") as
 * naming name: its names are split at commas and taken as written,
 * spaces included, in any case, and "core;util" names core (fi_info -t
 * FI_EP_RDM: FI_PROVIDER="udp, tcp" offers udp alone, "TCP" and
 * "tcp;ofi_rxm" offer tcp). Read any other way, fabrpc said FI_PROVIDER
 * allowed a provider that libfabric had hidden. */
static int fi_filter_names(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len >= n && strncasecmp(p, name, n) == 0 &&
            (len == n || p[n] == ';'))
            return 1;
        if (!end)
            return 0;
        p = end + 1;
    }
}

/* FI_PROVIDER's value when it hides name from libfabric's answers (a
 * list without it, or "^..." with it), else NULL. libfabric applies it
 * whatever fabrpc's own list says, so FABRPC_PROVIDER=shm under an
 * exported FI_PROVIDER=tcp can never have shm. */
static const char *fi_provider_hides(const char *name)
{
    const char *f = getenv("FI_PROVIDER");
    if (!f || !*f)
        return NULL;
    int neg = *f == '^';
    return fi_filter_names(f + neg, name) == neg ? f : NULL;
}

static void match_all(fr_backends *bs, struct fi_info *all, int ret)
{
    char up[160];
    came_up(all, up, sizeof(up));
    for (int i = 0; i < bs->n; i++) {
        fr_backend *b = &bs->b[i];
        for (struct fi_info *fi = all; fi && !b->up; fi = fi->next) {
            if (!core_is(fi->fabric_attr->prov_name, b->name))
                continue;
            struct fi_info *next = fi->next;
            fi->next = NULL;
            b->info = fi_dupinfo(fi);
            fi->next = next;
            b->up = b->info != NULL;
            /* Sources (FI_SOURCE) let fabric.c drop what a process
             * outside the job sends. In 1.17 shm, udp;ofi_rxd and sockets
             * report the capability unasked; ofi_rxm (tcp;ofi_rxm,
             * verbs;ofi_rxm) has it but returns it only when asked, and
             * asking in the hints would hide every provider without it,
             * so it is asked for here. */
            if (b->up && strstr(fi->fabric_attr->prov_name, "ofi_rxm"))
                b->info->caps |= FI_SOURCE;
            /* Two offer it but report sources that cannot be trusted,
             * and there the job token is the only check:
             * - udp;ofi_rxd: a member's frames came with another member's
             *   fi_addr (the rogue test over udp: 5 frames of rank 1
             *   reported as rank 0's);
             * - shm: the source is the peer id the sender writes into our
             *   queue: a stranger's frames came as a member's (the
             *   stranger test: rank 1's fi_addr at rank 0 and the
             *   reverse). shm serves only processes of the same user. */
            if (b->up && (strstr(fi->fabric_attr->prov_name, "ofi_rxd") ||
                          strcmp(fi->fabric_attr->prov_name, "shm") == 0))
                b->info->caps &= ~(uint64_t)FI_SOURCE;
        }
        b->unknown = !b->up && !libfabric_knows(b->name);
        const char *hider = b->up ? NULL : fi_provider_hides(b->name);
        if (b->unknown)
            snprintf(b->reason, sizeof(b->reason),
                     "unknown provider '%s' (no libfabric provider has that "
                     "name%s); these came up here: %s", b->name,
                     b->name[0] == '^' ? "; \"^\" excluding is "
                                         "FI_PROVIDER's, before its whole "
                                         "list"
                                       : "",
                     up[0] ? up : "none");
        else if (hider)
            snprintf(b->reason, sizeof(b->reason),
                     "hidden by FI_PROVIDER=\"%.64s\", which limits what "
                     "libfabric offers to every caller (unset it, or %s "
                     "%s%s); these came up: %s", hider,
                     *hider == '^' ? "take out" : "add", b->name,
                     strchr(hider, ' ') ? ": libfabric takes the names "
                                          "there as written, spaces "
                                          "included"
                                        : "",
                     up[0] ? up : "none");
        else if (!b->up)
            snprintf(b->reason, sizeof(b->reason),
                     "libfabric has no usable RDM endpoint for it here "
                     "(fi_getinfo: %s); these came up: %s",
                     ret ? fi_strerror(-ret) : "no matching provider",
                     up[0] ? up : "none");
    }
}

/*
 * A provider the user named that did not come up, but has an RDM
 * endpoint without RMA: say so. fabrpc cannot run on it: its calls move
 * payloads over the eager size by rendezvous (RMA reads, rndv.c), which
 * has no message-only fallback; only the one-sided API can be emulated
 * (config.rma). Asked only for a list the user gave (one more
 * fi_getinfo, a noticeable part of a second), and only when one of it
 * failed.
 */
static void explain_no_rma(fr_backends *bs)
{
    struct fi_info *hints, *all = NULL;
    int i;
    for (i = 0; i < bs->n && (bs->b[i].up || bs->b[i].unknown); i++)
        ;
    if (i == bs->n || !(hints = make_hints(0)))
        return;
    if (getinfo_all(hints, &all))
        all = NULL;
    fi_freeinfo(hints);
    for (i = 0; i < bs->n; i++) {
        fr_backend *b = &bs->b[i];
        for (struct fi_info *fi = all; fi && !b->up && !b->unknown;
             fi = fi->next)
            if (core_is(fi->fabric_attr->prov_name, b->name)) {
                snprintf(b->reason, sizeof(b->reason),
                         "provider %s has an RDM endpoint but no FI_RMA "
                         "(or no FI_READ/FI_WRITE): fabrpc's calls need RMA "
                         "for payloads over the eager size (rendezvous), "
                         "which is not emulated; only one-sided transfers "
                         "are (FABRPC_RMA=emulate)",
                         fi->fabric_attr->prov_name);
                break;
            }
    }
    if (all)
        fi_freeinfo(all);
}

/*
 * udp;ofi_rxd in libfabric 1.17 lets up to 128 packets per peer wait for
 * an acknowledgement (FI_OFI_RXD_MAX_UNACKED), and resends them all on
 * each timer round. Against a rank that does not poll for 3 s, those
 * resends piled up in its socket until its udp layer overran its own
 * queues ("failed to repost", "could not find posted rx to release") and
 * the rank crashed in libfabric or lost messages: 5000 calls failed every
 * run (tests/integration/async stall). With 32, 20000 passed every run.
 * Read once, when libfabric first loads its providers: so set before the
 * first fi_getinfo, and never over the user's own value.
 */
/*
 * tcp;ofi_rxm posts FI_OFI_RXM_MSG_RX_SIZE receive buffers of its own to
 * the tcp endpoints' shared receive queue, 4096 by default in 1.17: with
 * the pools sized from it, 88 MB zeroed at init in every rank, whatever
 * the job's size (91 MB resident after frpc_init, 13 MB on shm). With 256,
 * 35 MB zeroed, 41 MB resident, and no rate or bandwidth measurably lower
 * (4 interleaved pairs, 2026-11-29: calls/s at 64 in flight, 256 in
 * flight coalescing off, 16 MiB calls, 8 B round trip): a buffer is
 * posted again as soon as rxm has handled its message, and a message
 * that finds none waits in its socket (tcp's own flow control), so none
 * is lost.
 */
#define FR_RXM_MSG_RX_SIZE "256"

/*
 * sockets peeks its TCP stream for a whole 24-byte header and leaves a
 * shorter piece in the socket. That piece keeps its whole segment (up to
 * 64 KiB on loopback) charged to the receive buffer, 128 KiB by default
 * (tcp_rmem), so the kernel advertises a zero window and the rest of the
 * header never comes: every later frame between the two ranks waited
 * (async then-calls over sockets, 2 ranks, 3,000 calls at once, 4 runs at
 * a time on 2 cores: 4 of 400 runs stuck, ss showing Recv-Q 16 B and
 * skmem r129248 of rb131072 at the receiver, 71 KB unsent in persist at
 * the sender; the same failure in CI). FI_SOCKETS_MAX_BUF_SZ sets both
 * buffers, up to net.core.rmem_max/wmem_max (doubled by the kernel):
 * Debian's 212992 gives 416 KiB, room for the window to stay open with
 * any one segment charged. 0 of 400 runs stuck with 4 MiB, 0 of 400 with
 * 212992 (2026-12-01).
 */
#define FR_SOCKETS_BUF_SZ "4194304"

static void tune_providers(void)
{
    setenv("FI_OFI_RXD_MAX_UNACKED", "32", 0);
    setenv("FI_OFI_RXM_MSG_RX_SIZE", FR_RXM_MSG_RX_SIZE, 0);
    setenv("FI_SOCKETS_MAX_BUF_SZ", FR_SOCKETS_BUF_SZ, 0);
    /* fabrpc reads a variable set to "" as unset (fabrpc.h), but
     * libfabric reads FI_PROVIDER="" as a list of no providers and hides
     * every one: frpc_init then failed with "these came up: none". */
    const char *p = getenv("FI_PROVIDER");
    if (p && !*p)
        unsetenv("FI_PROVIDER");
}

int fr_backends_discover(fr_backends *bs, const char *list)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, tune_providers);
    char names[FR_BACKEND_MAX][FR_BACKEND_NAME];
    struct fi_info *hints, *all = NULL;
    int n, ret;

    if (!bs)
        return FRPC_EINVAL;
    memset(bs, 0, sizeof(*bs));
    bs->from_user = list != NULL;
    /* A user's list keeps what names no provider ("^udp", ";rxm", a
     * name too long): each fails frpc_init as an unknown provider. */
    n = parse(list ? list : FR_BACKENDS_DEFAULT, names, FR_BACKEND_MAX,
              list != NULL);
    if (n < 0)
        return n;
    for (int i = 0; i < n; i++)
        strcpy(bs->b[i].name, names[i]);
    bs->n = n;
    if (!(hints = make_hints(1)))
        return FRPC_ENOMEM;
    ret = getinfo_all(hints, &all);
    fi_freeinfo(hints);
    match_all(bs, ret ? NULL : all, ret);
    if (all)
        fi_freeinfo(all);
    if (list)
        explain_no_rma(bs);
    return 0;
}

void fr_backends_free(fr_backends *bs)
{
    if (!bs)
        return;
    for (int i = 0; i < bs->n; i++)
        if (bs->b[i].info)
            fi_freeinfo(bs->b[i].info);
    memset(bs, 0, sizeof(*bs));
}

const fr_backend *fr_backends_find(const fr_backends *bs, const char *name)
{
    for (int i = 0; bs && name && i < bs->n; i++)
        if (strcmp(bs->b[i].name, name) == 0)
            return &bs->b[i];
    return NULL;
}

int fr_backends_up_list(const fr_backends *bs, char *out, size_t len)
{
    size_t used = 0;
    int count = 0;

    if (len)
        out[0] = '\0';
    for (int i = 0; i < bs->n; i++) {
        if (!bs->b[i].up)
            continue;
        int w = snprintf(out + used, len - used, "%s%s", count ? "," : "",
                         bs->b[i].name);
        if (w < 0 || (size_t)w >= len - used)
            break;
        used += (size_t)w;
        count++;
    }
    return count;
}

int fr_backends_check_strict(const fr_backends *bs, char *errbuf,
                             size_t errlen)
{
    size_t used = 0;
    int missing = 0;

    for (int i = 0; i < bs->n; i++) {
        if (bs->b[i].up)
            continue;
        if (errbuf && used < errlen) {
            int w = snprintf(errbuf + used, errlen - used,
                             "%sstrict mode: required provider %s did not "
                             "come up: %s",
                             missing ? "; " : "", bs->b[i].name,
                             bs->b[i].reason);
            used += w > 0 ? (size_t)w : 0;
        }
        missing++;
    }
    return missing ? FRPC_ENOBACKEND : 0;
}

/* Is name an element of the comma list? */
static int in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p = end ? end + 1 : p + len;
    }
    return 0;
}

int fr_backends_choose(const char *order, const char *const *up_lists,
                       int n, int same_host, char *out, size_t len)
{
    char names[FR_BACKEND_MAX][FR_BACKEND_NAME];
    int k = order ? fr_backends_parse(order, names, FR_BACKEND_MAX) : -1;

    for (int i = 0; i < k; i++) {
        int everywhere = 1;
        if (!same_host && strcmp(names[i], "shm") == 0)
            continue;
        for (int r = 0; r < n && everywhere; r++)
            everywhere = in_list(up_lists[r], names[i]);
        if (everywhere) {
            snprintf(out, len, "%s", names[i]);
            return 0;
        }
    }
    return FRPC_ENOBACKEND;
}

size_t fr_backends_report(const fr_backends *bs, const char *active,
                          char *buf, size_t len)
{
    size_t need = 0;
    if (buf && len) /* terminated even when no line fits (len 1) */
        buf[0] = '\0';
    for (int i = 0; i < bs->n; i++) {
        const fr_backend *b = &bs->b[i];
        /* Room for the longest line: a line cut here would count in need
         * at its full length and leave a hole before the next one. */
        char line[sizeof(b->name) + sizeof(b->reason) + 32];
        int w;
        if (b->up)
            w = snprintf(line, sizeof(line), "%s: up%s\n", b->name,
                         active && strcmp(active, b->name) == 0
                             ? " (active)"
                             : "");
        else
            w = snprintf(line, sizeof(line), "%s: not available: %s\n",
                         b->name, b->reason);
        if (w < 0)
            continue;
        if (buf && need + 1 < len)
            snprintf(buf + need, len - need, "%s", line);
        need += (size_t)w;
    }
    return need;
}
