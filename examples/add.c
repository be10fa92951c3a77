#include <stdio.h>
#include <fabrpc.h>

/* Runs on the callee. The request is answered exactly once. */
static void add(frpc_request *req, void *user)
{
    frpc_mp_view args;                 /* zero-copy msgpack view */
    if (frpc_request_unpack(req, &args) != 0 ||
        args.obj.type != MSGPACK_OBJECT_ARRAY || args.obj.via.array.size != 2) {
        frpc_respond_error(req, 1, "add wants [a, b]");
        return;
    }
    int64_t sum = args.obj.via.array.ptr[0].via.i64 +
                  args.obj.via.array.ptr[1].via.i64;
    frpc_mp_view_free(&args);

    frpc_mp_buf out;
    frpc_mp_buf_init(&out);
    msgpack_pack_int64(&out.pk, sum);
    frpc_respond(req, out.sbuf.data, out.sbuf.size);   /* copies */
    frpc_mp_buf_destroy(&out);
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
    frpc_register(agent, "add", add, NULL, 0);
    frpc_barrier(agent, 10000);        /* everyone has registered */

    if (frpc_rank(agent) == 0 && frpc_world_size(agent) > 1) {
        frpc_mp_buf args;
        frpc_mp_buf_init(&args);
        msgpack_pack_array(&args.pk, 2);
        msgpack_pack_int64(&args.pk, 40);
        msgpack_pack_int64(&args.pk, 2);

        frpc_result res;               /* owns the reply; clear it */
        rc = frpc_call(agent, 1, "add", args.sbuf.data, args.sbuf.size,
                       5000 /* ms */, &res);
        if (rc == 0) {
            frpc_mp_view v;
            if (frpc_mp_parse(res.data, res.len, &v) == 0) {
                printf("40 + 2 = %lld\n", (long long)v.obj.via.i64);
                frpc_mp_view_free(&v);
            }
        } else {
            /* res.error says what happened: the remote message, the
             * unknown function's name, the provider's text, ... */
            fprintf(stderr, "%s: %s\n", frpc_err_name(rc), res.error);
        }
        frpc_result_clear(&res);
        frpc_mp_buf_destroy(&args);
    }
    /* Graceful: finishes in-flight calls, serves others until all ranks
     * are here, then frees the agent. */
    return frpc_shutdown(agent, FRPC_SHUTDOWN_GRACEFUL, 30000) ? 1 : 0;
}
