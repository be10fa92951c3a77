/*
 * The public msgpack helpers of fabrpc.h: thin wrappers over
 * serialization/mp.h and msgpack-c's sbuffer and packer.
 * (frpc_request_unpack lives in request.c, next to frpc_request.)
 *
 * A view and a buffer are made safe to free twice: free and destroy leave
 * them in their empty state, and a view whose parse failed is empty.
 */
#include "rpc/fabrpc.h"
#include "serialization/mp.h"

#include <string.h>

int frpc_mp_parse(const void *buf, size_t len, frpc_mp_view *view)
{
    if (view == NULL)
        return FRPC_EINVAL;
    int rc = fr_mp_parse(buf, len, &view->obj, &view->zone);
    if (rc != 0)
        memset(view, 0, sizeof *view);
    return rc;
}

void frpc_mp_view_free(frpc_mp_view *view)
{
    if (view == NULL)
        return;
    /* A zeroed zone (failed or already freed view) owns no chunk. */
    if (view->zone.chunk_list.head != NULL)
        msgpack_zone_destroy(&view->zone);
    memset(view, 0, sizeof *view);
}

void frpc_mp_buf_init(frpc_mp_buf *p)
{
    if (p == NULL)
        return;
    msgpack_sbuffer_init(&p->sbuf);
    msgpack_packer_init(&p->pk, &p->sbuf, msgpack_sbuffer_write);
}

void frpc_mp_buf_destroy(frpc_mp_buf *p)
{
    if (p == NULL)
        return;
    msgpack_sbuffer_destroy(&p->sbuf);
    frpc_mp_buf_init(p);
}
