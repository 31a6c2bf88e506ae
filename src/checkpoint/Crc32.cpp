// Checkpoint CRC32s: a 512-bit carry-less-multiply fold where the CPU has AVX-512 and
// VPCLMULQDQ, libdeflate's libdeflate_crc32 otherwise (Crc32.h).
#include "checkpoint/Crc32.h"

#include <libdeflate.h>
#include <zlib.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define RINGTRAIN_CRC32_FOLD 1
#endif

namespace ringtrain {
namespace {

// Below this the fold's set-up and final reduction are not worth it.
constexpr std::size_t kFoldMin = 1024;

}  // namespace

std::uint32_t checkpoint_crc32(std::span<const std::byte> bytes, std::uint32_t crc) noexcept {
  static const bool fold = checkpoint_crc32_fold_available();
  if (fold && bytes.size() >= kFoldMin) return checkpoint_crc32_fold(bytes, crc);
  return checkpoint_crc32_libdeflate(bytes, crc);
}

std::uint32_t checkpoint_crc32_libdeflate(std::span<const std::byte> bytes, std::uint32_t crc) noexcept {
  // size_t length: no pieces needed for buffers past 4 GB (zlib's crc32 takes a uInt).
  return libdeflate_crc32(crc, bytes.data(), bytes.size());
}

std::uint32_t checkpoint_crc32_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::size_t b_bytes) noexcept {
  return static_cast<std::uint32_t>(::crc32_combine(crc_a, crc_b, static_cast<z_off_t>(b_bytes)));
}

#ifdef RINGTRAIN_CRC32_FOLD
namespace {

// Folding (Gopal et al., "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ
// Instruction", Intel, 2009), in the bit-reflected order of zlib's CRC-32. A 128-bit lane
// loaded from memory is the polynomial H * x^64 + L: its low 64 bits (the earlier bytes) are
// H, with bit i the coefficient of x^(63 - i), and its high 64 bits are L. Moving the lane
// `bits` further on multiplies it by x^bits, and modulo P that is H * (x^(64 + bits) mod P)
// + L * (x^bits mod P): two carry-less products of at most 96 bits, congruent to the lane
// for the CRC. A carry-less product of two reflected 64-bit numbers, read as a reflected
// 128-bit number, is x times the product of the polynomials, hence the exponents less one.
constexpr std::uint64_t kPoly = 0x104C11DB7ull;  // CRC-32's P(x), x^32 + ... + 1

constexpr std::uint32_t x_power_mod_p(unsigned n) {
  std::uint64_t r = 1;  // x^0
  for (unsigned i = 0; i < n; ++i) {
    r <<= 1;
    if (r & (std::uint64_t{1} << 32)) r ^= kPoly;
  }
  return static_cast<std::uint32_t>(r);
}

// A polynomial of degree < 32 as a reflected 64-bit operand: x^j at bit 63 - j.
constexpr std::uint64_t reflected(std::uint32_t k) {
  std::uint64_t q = 0;
  for (unsigned j = 0; j < 32; ++j) {
    if ((k >> j) & 1u) q |= std::uint64_t{1} << (63 - j);
  }
  return q;
}

struct Fold {
  std::uint64_t h;  // multiplies H (the lane's low half)
  std::uint64_t l;  // multiplies L (its high half)
};
constexpr Fold fold_by(unsigned bits) { return {reflected(x_power_mod_p(63 + bits)), reflected(x_power_mod_p(bits - 1))}; }

__attribute__((target("avx512f,vpclmulqdq,pclmul"))) inline __m512i fold_zmm(__m512i a, Fold f) {
  const auto h = static_cast<long long>(f.h), l = static_cast<long long>(f.l);
  const __m512i k = _mm512_set_epi64(l, h, l, h, l, h, l, h);  // each lane: h low, l high
  return _mm512_xor_si512(_mm512_clmulepi64_epi128(a, k, 0x00), _mm512_clmulepi64_epi128(a, k, 0x11));
}

__attribute__((target("pclmul,sse2"))) inline __m128i fold_xmm(__m128i a, Fold f) {
  const __m128i k = _mm_set_epi64x(static_cast<long long>(f.l), static_cast<long long>(f.h));
  return _mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11));
}

}  // namespace

bool checkpoint_crc32_fold_available() noexcept {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("pclmul");
}

// Four 512-bit accumulators over 256 bytes a round (each lane folded 2048 bits on), reduced
// to one 128-bit lane at the end of the whole 256-byte blocks; that lane and the rest go
// through libdeflate from a zero register, which gives the CRC: the fold keeps everything
// before the lane congruent modulo P, and the CRC is a remainder modulo P.
__attribute__((target("avx512f,vpclmulqdq,pclmul"))) std::uint32_t checkpoint_crc32_fold(std::span<const std::byte> bytes,
                                                                                         std::uint32_t crc) noexcept {
  const std::byte* p = bytes.data();
  const std::size_t blocks = bytes.size() / 256;
  if (blocks == 0) return checkpoint_crc32_libdeflate(bytes, crc);
  // zlib's CRC starts from the register ~crc: the same as xoring it into the first 4 bytes.
  __m512i z0 = _mm512_xor_si512(_mm512_loadu_si512(p), _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                                         static_cast<int>(~crc)));
  __m512i z1 = _mm512_loadu_si512(p + 64);
  __m512i z2 = _mm512_loadu_si512(p + 128);
  __m512i z3 = _mm512_loadu_si512(p + 192);
  constexpr Fold k2048 = fold_by(2048);
  for (std::size_t b = 1; b < blocks; ++b) {
    const std::byte* q = p + 256 * b;
    z0 = _mm512_xor_si512(fold_zmm(z0, k2048), _mm512_loadu_si512(q));
    z1 = _mm512_xor_si512(fold_zmm(z1, k2048), _mm512_loadu_si512(q + 64));
    z2 = _mm512_xor_si512(fold_zmm(z2, k2048), _mm512_loadu_si512(q + 128));
    z3 = _mm512_xor_si512(fold_zmm(z3, k2048), _mm512_loadu_si512(q + 192));
  }
  __m512i z = _mm512_xor_si512(_mm512_xor_si512(fold_zmm(z0, fold_by(1536)), fold_zmm(z1, fold_by(1024))),
                               _mm512_xor_si512(fold_zmm(z2, fold_by(512)), z3));
  // The four lanes through memory: GCC 12's lane extracts warn of an uninitialised operand.
  alignas(64) __m128i lanes[4];
  _mm512_store_si512(lanes, z);
  const __m128i x = _mm_xor_si128(_mm_xor_si128(fold_xmm(lanes[0], fold_by(384)), fold_xmm(lanes[1], fold_by(256))),
                                  _mm_xor_si128(fold_xmm(lanes[2], fold_by(128)), lanes[3]));
  alignas(16) std::byte lane[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(lane), x);
  // libdeflate_crc32(c, ...) runs from the register ~c: 0xFFFFFFFF gives the zero register.
  const std::uint32_t through_lane = libdeflate_crc32(0xFFFFFFFFu, lane, sizeof lane);
  return libdeflate_crc32(through_lane, p + 256 * blocks, bytes.size() - 256 * blocks);
}

#else

bool checkpoint_crc32_fold_available() noexcept { return false; }

std::uint32_t checkpoint_crc32_fold(std::span<const std::byte> bytes, std::uint32_t crc) noexcept {
  return checkpoint_crc32_libdeflate(bytes, crc);
}

#endif

}  // namespace ringtrain
