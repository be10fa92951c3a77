/* See copy_out.h. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "comm/copy_out.h"

#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>

/* Below this a copy stays in cache either way and the fence costs more
 * than it saves. */
#define STREAM_MIN 4096

void fr_copy_out(void *dst, const void *src, size_t len)
{
    if (len < STREAM_MIN) {
        memcpy(dst, src, len);
        return;
    }
    char *d = dst;
    const char *s = src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    memcpy(d, s, head); /* the stores below need d 16-byte aligned */
    d += head;
    s += head;
    len -= head;
    for (; len >= 64; d += 64, s += 64, len -= 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
        _mm_stream_si128((__m128i *)d, a);
        _mm_stream_si128((__m128i *)(d + 16), b);
        _mm_stream_si128((__m128i *)(d + 32), c);
        _mm_stream_si128((__m128i *)(d + 48), e);
    }
    memcpy(d, s, len);
    /* Non-temporal stores are weakly ordered: the fence puts them before
     * whatever tells the reader the block is ready. */
    _mm_sfence();
}

#else

void fr_copy_out(void *dst, const void *src, size_t len)
{
    memcpy(dst, src, len);
}

#endif
