/*
 * Reassembly of frames sent in parts (FR_ENV_PART, envelope.h).
 *
 * Why parts: shm (libfabric 1.17) copies a message of up to its inject
 * size (4096 B) through its own queue, and moves a longer one by CMA:
 * the receiver's process_vm_readv, then an answer before the sender's
 * send completes. A call whose args are 4096 B has a 4144-byte frame, and
 * went from 1.6 us (4000 B) to 6.2 us that way; as two injects it stays on
 * the queue. So on shm a frame a little over the inject size is sent as a
 * few parts, and put together here.
 *
 * A receiver cannot trust parts: a member of the job may be buggy, and a
 * part may be lost with its sender. So every part is checked against the
 * others of its frame (same length, no overlap), a frame is never longer
 * than the limit given at creation, and each source has at most
 * FR_PARTS_PER_SOURCE frames in the making: a part of a new frame when all
 * are taken evicts the one least recently added to (counted). Parts of a
 * frame may arrive in any order. Pure: no libfabric; thread-safe.
 */
#ifndef FR_COMM_PARTS_H
#define FR_COMM_PARTS_H

#include <stddef.h>
#include <stdint.h>

/* Frames in the making per source. A sender sends at most
 * FR_SPLIT_SENDERS (4) parted frames at a time (fabric_internal.h), so
 * more come only from a receiver handling completions out of order, or a
 * broken peer. */
#define FR_PARTS_PER_SOURCE 16
/* Parts a frame may have: a frame longer than this many parts of its
 * sender's size is not sent in parts. */
#define FR_PARTS_MAX 16

typedef struct fr_parts fr_parts;

/* A table for sources 0..world-1 and wholes of at most max_frame bytes.
 * A whole is laid out with its first head bytes (its header) at its end,
 * after the rest: so the rest (a payload) starts a malloc'd buffer, which
 * the receiver can hand on without copying it (a request's args, a
 * reply for the caller to free). head 0: as the frame is. NULL without
 * memory or for world == 0, max_frame == 0 or head > max_frame. */
fr_parts *fr_parts_new(uint32_t world, size_t max_frame, size_t head);

/* Frees the table and every frame in the making. NULL is a no-op. */
void fr_parts_free(fr_parts *p);

/*
 * Adds the part bytes[0..len) at offset off of the frame `id` from src,
 * whose whole length is total. Returns:
 *   0             the frame is not whole yet (the bytes were copied);
 *   1             this part made it whole: *whole is a malloc'd buffer of
 *                 total bytes, the frame's bytes from head on, then its
 *                 first head bytes, that the caller owns and frees;
 *   FRPC_EPROTO   src out of range, total over max_frame or under head,
 *                 the part outside total, or in conflict with the frame's
 *                 earlier parts (another total, an overlap, too many
 *                 parts): the part is dropped, and so is the frame in the
 *                 making;
 *   FRPC_ENOMEM   no memory: the part is dropped, and so is its frame;
 *   FRPC_EINVAL   NULL p, bytes or whole, or len == 0.
 * Never blocks but on its own lock.
 */
int fr_parts_add(fr_parts *p, uint32_t src, uint64_t id, size_t total,
                 size_t off, const void *bytes, size_t len, uint8_t **whole);

/* Drops every frame in the making from src (a peer lost): not counted
 * by fr_parts_dropped, since nothing went wrong here. */
void fr_parts_drop_source(fr_parts *p, uint32_t src);

/* Frames dropped so far: evicted for room, or by a part in conflict. */
uint64_t fr_parts_dropped(fr_parts *p);

/* Frames in the making now, over all sources (tests). */
unsigned fr_parts_pending(fr_parts *p);

#endif /* FR_COMM_PARTS_H */
