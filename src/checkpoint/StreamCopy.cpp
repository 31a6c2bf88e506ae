// Streaming-store copies (StreamCopy.h).
#include "checkpoint/StreamCopy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ringtrain {

void stream_copy(std::byte* dst, const std::byte* src, std::size_t bytes) noexcept {
  if (bytes == 0) return;
#if defined(__SSE2__)
  // The head up to dst's first 16-byte boundary and the tail after its last are plain
  // copies; the source may have any alignment (the snapshot's sections sit at byte
  // offsets after the metadata text).
  const std::size_t head = std::min<std::size_t>(bytes, (16 - reinterpret_cast<std::uintptr_t>(dst) % 16) % 16);
  std::memcpy(dst, src, head);
  std::size_t at = head;
  for (; at + 64 <= bytes; at += 64) {  // one cache line per iteration
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + at));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + at + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + at + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + at + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + at), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + at + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + at + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + at + 48), d);
  }
  for (; at + 16 <= bytes; at += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + at), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + at)));
  }
  std::memcpy(dst + at, src + at, bytes - at);
#else
  std::memcpy(dst, src, bytes);
#endif
}

void stream_zero(std::byte* dst, std::size_t bytes) noexcept {
  if (bytes == 0) return;
#if defined(__SSE2__)
  const std::size_t head = std::min<std::size_t>(bytes, (16 - reinterpret_cast<std::uintptr_t>(dst) % 16) % 16);
  std::memset(dst, 0, head);
  std::size_t at = head;
  const __m128i zero = _mm_setzero_si128();
  for (; at + 16 <= bytes; at += 16) _mm_stream_si128(reinterpret_cast<__m128i*>(dst + at), zero);
  std::memset(dst + at, 0, bytes - at);
#else
  std::memset(dst, 0, bytes);
#endif
}

void stream_fence() noexcept {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace ringtrain
