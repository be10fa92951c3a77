/*
 * msgpack helpers with no I/O: parse one object from a byte string without
 * copying its strings and binaries.
 */
#ifndef FR_SER_MP_H
#define FR_SER_MP_H

#include <stddef.h>
#include <msgpack.h>

#include "serialization/fabrpc_errors.h"

/* Deepest nesting of arrays and maps accepted: a scalar is at depth 0, an
 * array of scalars at depth 1. */
#define FR_MP_MAX_DEPTH 64u

/*
 * Parses exactly one msgpack object that fills buf[0..len). On success *obj
 * refers into buf (str, bin, ext) and into *zone (arrays, maps), and the
 * caller must msgpack_zone_destroy(zone) when done; buf must outlive obj.
 * *zone is storage, not a live zone: fr_mp_parse initializes it (a zone
 * already initialized would leak). On error there is nothing to destroy:
 * *zone is left zeroed and *obj is unspecified. Memory used is bounded by a
 * small multiple of len, whatever counts the bytes claim.
 * Errors: FRPC_EINVAL (NULL obj or zone, or NULL buf with len > 0),
 * FRPC_EPROTO (empty, malformed, truncated, trailing bytes, the reserved
 * byte 0xc1, or nesting deeper than FR_MP_MAX_DEPTH), FRPC_ENOMEM.
 * Pure; any thread.
 */
int fr_mp_parse(const void *buf, size_t len, msgpack_object *obj,
                msgpack_zone *zone);

#endif /* FR_SER_MP_H */
