#include <stdio.h>
#include <fabrpc.h>

static int is_int(const msgpack_object *o)
{
    return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
           o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER;
}

/* An answer that could not be sent (the caller gone, or out of time):
 * req is freed all the same, and the caller's call ends by its own
 * timeout or peer loss; the callee can only say so. */
static void answered(int rc)
{
    if (rc != 0)
        fprintf(stderr, "add: answer not sent: %s\n", frpc_strerror(rc));
}

/* Runs on the callee. The request is answered exactly once, and the view
 * is freed on every path. */
static void add(frpc_request *req, void *user)
{
    (void)user;                        /* no state of its own */
    frpc_mp_view args;                 /* zero-copy msgpack view */
    if (frpc_request_unpack(req, &args) != 0) {
        answered(frpc_respond_error(req, 1, "add wants msgpack [a, b]"));
        return;
    }
    const msgpack_object *o = &args.obj;
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 2 ||
        !is_int(&o->via.array.ptr[0]) || !is_int(&o->via.array.ptr[1])) {
        frpc_mp_view_free(&args);
        answered(frpc_respond_error(req, 1, "add wants [a, b] of integers"));
        return;
    }
    int64_t sum = o->via.array.ptr[0].via.i64 + o->via.array.ptr[1].via.i64;
    frpc_mp_view_free(&args);

    frpc_mp_buf out;
    frpc_mp_buf_init(&out);
    if (msgpack_pack_int64(&out.pk, sum) != 0)
        answered(frpc_respond_error(req, 2, "out of memory"));
    else   /* frpc_respond copies */
        answered(frpc_respond(req, out.sbuf.data, out.sbuf.size));
    frpc_mp_buf_destroy(&out);
}

/* Calls add on rank dst with the n integers in v; prints the outcome. */
static int call_add(frpc_agent *agent, int dst, const int64_t *v, int n)
{
    frpc_mp_buf args;
    frpc_mp_buf_init(&args);
    int packed = msgpack_pack_array(&args.pk, (size_t)n) == 0;
    for (int i = 0; packed && i < n; i++)
        packed = msgpack_pack_int64(&args.pk, v[i]) == 0;
    if (!packed) {                     /* -1: out of memory */
        frpc_mp_buf_destroy(&args);
        printf("add of %d numbers: no memory for the args\n", n);
        return FRPC_ENOMEM;
    }

    frpc_result res;                   /* owns the reply; clear it */
    int rc = frpc_call(agent, dst, "add", args.sbuf.data, args.sbuf.size,
                       5000 /* ms */, &res);
    frpc_mp_buf_destroy(&args);
    if (rc == 0) {
        frpc_mp_view r;
        if (frpc_mp_parse(res.data, res.len, &r) == 0 && is_int(&r.obj))
            printf("%lld + %lld = %lld\n", (long long)v[0], (long long)v[1],
                   (long long)r.obj.via.i64);
        else
            rc = FRPC_EPROTO;
        frpc_mp_view_free(&r);         /* harmless after a failed parse */
    } else {
        /* res.error says what happened: the remote message, the
         * unknown function's name, the provider's text, ... */
        printf("add of %d numbers: %s: %s\n", n, frpc_err_name(rc),
               res.error);
    }
    frpc_result_clear(&res);
    return rc;
}

int main(void)
{
    char err[512];
    frpc_config cfg;
    frpc_agent *agent;

    frpc_config_init(&cfg);            /* rank, size, store: from env */
    cfg.errbuf = err;
    cfg.errbuf_len = sizeof(err);
    int rc = frpc_init(&cfg, &agent);
    if (rc) {
        fprintf(stderr, "init: %s: %s\n", frpc_strerror(rc), err);
        return 1;
    }
    if ((rc = frpc_register(agent, "add", add, NULL, 0)) ||
        (rc = frpc_barrier(agent, 10000))) {   /* everyone has registered */
        fprintf(stderr, "register/barrier: %s\n", frpc_strerror(rc));
        frpc_shutdown(agent, FRPC_SHUTDOWN_IMMEDIATE, 0);
        return 1;
    }

    int failed = 0;
    if (frpc_rank(agent) == 0 && frpc_world_size(agent) > 1) {
        const int64_t v[2] = {40, 2};
        failed = call_add(agent, 1, v, 2) != 0;
        /* The wrong shape: the handler answers with an error. */
        failed |= call_add(agent, 1, v, 1) != FRPC_EREMOTE;
    }
    /* Graceful: finishes in-flight calls, serves others until all ranks
     * are here, then frees the agent. */
    rc = frpc_shutdown(agent, FRPC_SHUTDOWN_GRACEFUL, 30000);
    return rc || failed ? 1 : 0;
}
