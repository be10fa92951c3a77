/*
 * hello: every rank calls every other rank's "hello" function with a
 * msgpack map {"from": rank, "text": "hello"} and prints each reply.
 *
 *   fabrpc-run -n 4 examples/hello            (shm on one host)
 *   fabrpc-run -n 4 --provider tcp examples/hello
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fabrpc.h>

/* The value stored under key in a msgpack map, or NULL. */
static const msgpack_object *map_get(const msgpack_object *map,
                                     const char *key)
{
    size_t n = strlen(key);
    if (map->type != MSGPACK_OBJECT_MAP)
        return NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object_kv *kv = &map->via.map.ptr[i];
        if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == n &&
            memcmp(kv->key.via.str.ptr, key, n) == 0)
            return &kv->val;
    }
    return NULL;
}

/* The handler: reads the caller's map without copying it and answers
 * with a map {"from": callee, "to": caller, "text": "hello ..."} */
static void hello(frpc_request *req, void *user)
{
    frpc_agent *agent = user;
    frpc_mp_view args;
    int from = -1;

    if (frpc_request_unpack(req, &args) != 0 ||
        args.obj.type != MSGPACK_OBJECT_MAP) {
        frpc_mp_view_free(&args); /* parsed, but not a map; else a no-op */
        frpc_respond_error(req, 1, "hello expects a msgpack map");
        return;
    }
    const msgpack_object *f = map_get(&args.obj, "from");
    if (f && f->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        from = (int)f->via.u64;
    frpc_mp_view_free(&args);

    char text[64];
    snprintf(text, sizeof(text), "hello from rank %d to rank %d",
             frpc_rank(agent), from);
    frpc_mp_buf out;
    frpc_mp_buf_init(&out);
    msgpack_pack_map(&out.pk, 2);
    msgpack_pack_str_with_body(&out.pk, "from", 4);
    msgpack_pack_int(&out.pk, frpc_rank(agent));
    msgpack_pack_str_with_body(&out.pk, "text", 4);
    msgpack_pack_str_with_body(&out.pk, text, strlen(text));
    frpc_respond(req, out.sbuf.data, out.sbuf.size);
    frpc_mp_buf_destroy(&out);
}

/* Prints the "text" field of a reply. */
static void print_reply(int me, int peer, const frpc_result *res)
{
    frpc_mp_view v;
    if (frpc_mp_parse(res->data, res->len, &v) != 0 ||
        v.obj.type != MSGPACK_OBJECT_MAP) {
        frpc_mp_view_free(&v);
        printf("rank %d: reply from rank %d is not a map\n", me, peer);
        return;
    }
    const msgpack_object *t = map_get(&v.obj, "text");
    if (t && t->type == MSGPACK_OBJECT_STR)
        printf("rank %d called rank %d: %.*s\n", me, peer,
               (int)t->via.str.size, t->via.str.ptr);
    else
        printf("rank %d: reply from rank %d has no text\n", me, peer);
    frpc_mp_view_free(&v);
}

int main(void)
{
    char err[1024] = "";
    frpc_config cfg;
    frpc_agent *agent;
    int rc, failed = 0;

    frpc_config_init(&cfg);
    cfg.errbuf = err;
    cfg.errbuf_len = sizeof(err);
    if ((rc = frpc_init(&cfg, &agent)) != 0) {
        fprintf(stderr, "frpc_init: %s: %s\n", frpc_strerror(rc), err);
        return 1;
    }
    int me = frpc_rank(agent), n = frpc_world_size(agent);
    if (me == 0)
        printf("%d ranks over provider %s (%s)\n", n, frpc_provider(agent),
               frpc_provider_full(agent));

    if ((rc = frpc_register(agent, "hello", hello, agent, 0)) ||
        (rc = frpc_barrier(agent, 30000))) { /* every rank has registered */
        fprintf(stderr, "rank %d: register/barrier: %s\n", me,
                frpc_strerror(rc));
        frpc_shutdown(agent, FRPC_SHUTDOWN_IMMEDIATE, 0);
        return 1;
    }

    frpc_mp_buf args;
    frpc_mp_buf_init(&args);
    msgpack_pack_map(&args.pk, 2);
    msgpack_pack_str_with_body(&args.pk, "from", 4);
    msgpack_pack_int(&args.pk, me);
    msgpack_pack_str_with_body(&args.pk, "text", 4);
    msgpack_pack_str_with_body(&args.pk, "hello", 5);
    for (int peer = 0; peer < n; peer++) {
        frpc_result res;
        if (peer == me)
            continue;
        rc = frpc_call(agent, peer, "hello", args.sbuf.data, args.sbuf.size,
                       10000, &res);
        if (rc == 0)
            print_reply(me, peer, &res);
        else {
            fprintf(stderr, "rank %d: call to rank %d failed: %s\n", me, peer,
                    res.error ? res.error : frpc_strerror(rc));
            failed = 1;
        }
        frpc_result_clear(&res);
    }
    frpc_mp_buf_destroy(&args);

    /* What this rank saw of "hello", as caller and as callee; after the
     * barrier, every rank's calls to it have been answered. */
    frpc_fn_stats st;
    if (frpc_barrier(agent, 30000) == 0 &&
        frpc_get_fn_stats(agent, "hello", &st) == 0)
        printf("rank %d: 'hello' called %llu times (p50 %.1f us, max %.1f "
               "us), answered %llu\n", me, (unsigned long long)st.calls,
               (double)st.call_ns_p50 / 1e3, (double)st.call_ns_max / 1e3,
               (unsigned long long)st.handled);
    rc = frpc_shutdown(agent, FRPC_SHUTDOWN_GRACEFUL, 30000);
    return failed || rc ? 1 : 0;
}
