/*
 * A copy that another core reads next. Over shm a block that this rank
 * fills (a reply, copied args) is read by the peer's own process_vm_readv
 * on its core. Filled with ordinary stores, the block's lines sit dirty
 * in this core's cache and the reader takes each from there; when the
 * host has put the two cores on different caches (the machine's slow
 * state, docs/bench/2026-12-03-bimodal) that costs more than the read
 * from memory: a 64 KiB call took 55-66 us there, 26-35 with the copy
 * made by non-temporal stores, which send the bytes to memory and leave
 * the lines out of this core's cache (docs/bench/2026-12-03-copy-out).
 */
#ifndef FR_COMM_COPY_OUT_H
#define FR_COMM_COPY_OUT_H

#include <stddef.h>

/* memcpy(dst, src, len) for a dst that another core will read next and
 * this one will not touch: non-temporal stores where the CPU has them
 * (x86-64), else memcpy. The regions must not overlap. Visible to other
 * cores once it returns, as memcpy's bytes are to a later release. */
void fr_copy_out(void *dst, const void *src, size_t len);

#endif
