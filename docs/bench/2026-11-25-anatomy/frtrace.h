#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* built with -include before config.h */
#endif
#ifndef FRTRACE_H
#define FRTRACE_H
#include <stdint.h>
#include <x86intrin.h>
#include <stdatomic.h>
typedef struct { uint64_t t; uint32_t id, tid; } fr_trace_rec;
extern fr_trace_rec *fr_trace_buf;
extern atomic_size_t fr_trace_n;
#define FR_TRACE_MAX (8u << 20)
static inline void FRT(uint32_t id) {
    if (!fr_trace_buf) return;
    size_t i = atomic_fetch_add_explicit(&fr_trace_n, 1, memory_order_relaxed);
    if (i < FR_TRACE_MAX) { fr_trace_buf[i].t = __rdtsc(); fr_trace_buf[i].id = id; }
}
#endif
