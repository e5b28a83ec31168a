#include "copy_uncached.h"

#include <stdint.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>

void mr_copy_uncached(void *dst, const void *src, size_t bytes) {
  uint8_t *d = dst;
  const uint8_t *s = src;
  /* Streaming stores want 16-byte aligned destinations: the head and the
   * tail go the ordinary way. */
  size_t head = (16 - ((uintptr_t)d & 15)) & 15;
  if (head > bytes)
    head = bytes;
  memcpy(d, s, head);
  d += head, s += head, bytes -= head;
  for (; bytes >= 64; d += 64, s += 64, bytes -= 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)s);
    __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
    __m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
    _mm_stream_si128((__m128i *)d, a);
    _mm_stream_si128((__m128i *)(d + 16), b);
    _mm_stream_si128((__m128i *)(d + 32), c);
    _mm_stream_si128((__m128i *)(d + 48), e);
  }
  memcpy(d, s, bytes);
}

void mr_copy_uncached_fence(void) { _mm_sfence(); }

#else

void mr_copy_uncached(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }

void mr_copy_uncached_fence(void) {}

#endif
