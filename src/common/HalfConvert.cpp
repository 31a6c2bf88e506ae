// bf16 / fp16 conversions (see HalfConvert.h).
//
// Vector kernels: AVX-512 BF16's VCVTNEPS2BF16 narrows 16 floats to bf16 in one
// instruction; fp16 uses F16C (VCVTPS2PH / VCVTPH2PS, 8 lanes); widening bf16 is a 16-bit
// shift, done with AVX-512F. The functions carry target attributes and run only after
// __builtin_cpu_supports says the CPU has the feature, so a build without -march=native
// still uses them. Tails shorter than a vector go through the same instruction on a
// zero-padded copy, so every element of an array takes one path.
#include "common/HalfConvert.h"

#include <cpuid.h>
#include <immintrin.h>

#include <cstring>
#include <stdexcept>

namespace ringtrain {
namespace {

std::uint32_t bits_of(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float float_of(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

bool cpu_has_bf16() {
  static const bool has = __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512bf16");
  return has;
}

bool cpu_has_f16c() {
  // F16C straight from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not
  // know "f16c" (the fuzz build compiles this file with clang); "avx" covers the OS's
  // saving of the ymm state.
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 &&
           (ecx & bit_F16C) != 0;
  }();
  return has;
}

bool cpu_has_avx512f() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

// ---- scalar loops -------------------------------------------------------------------

void narrow_bf16_scalar(const float* src, std::uint16_t* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = float_to_bf16(src[i]);
}
void widen_scaled_bf16_scalar(const std::uint16_t* src, float* dst, std::size_t n, float scale) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]) * scale;
}
void widen_add_bf16_scalar(const std::uint16_t* src, float* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] += bf16_to_float(src[i]);
}
void narrow_fp16_scalar(const float* src, std::uint16_t* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = float_to_fp16(src[i]);
}
void widen_scaled_fp16_scalar(const std::uint16_t* src, float* dst, std::size_t n, float scale) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = fp16_to_float(src[i]) * scale;
}
void widen_add_fp16_scalar(const std::uint16_t* src, float* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] += fp16_to_float(src[i]);
}

// ---- AVX-512 (bf16) -------------------------------------------------------------------

#define RINGTRAIN_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define RINGTRAIN_AVX512_TARGET __attribute__((target("avx512f")))
#define RINGTRAIN_F16C_TARGET __attribute__((target("avx,f16c")))

RINGTRAIN_BF16_TARGET void narrow16_bf16(const float* src, std::uint16_t* dst) {
  const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(src));
  std::memcpy(dst, &h, 32);
}

RINGTRAIN_BF16_TARGET void narrow_bf16_avx512(const float* src, std::uint16_t* dst,
                                              std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) narrow16_bf16(src + i, dst + i);
  if (i < n) {
    float in[16] = {};
    std::uint16_t out[16];
    std::memcpy(in, src + i, (n - i) * sizeof(float));
    narrow16_bf16(in, out);
    std::memcpy(dst + i, out, (n - i) * sizeof(std::uint16_t));
  }
}

RINGTRAIN_AVX512_TARGET __m512 widen16_bf16(const std::uint16_t* src) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
  // The zero-masking forms: GCC 12 warns about the undefined-source ones (a false
  // positive of _mm512_undefined_epi32).
  const __mmask16 all = 0xFFFF;
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all, _mm512_maskz_cvtepu16_epi32(all, h), 16));
}

RINGTRAIN_AVX512_TARGET void widen_scaled_bf16_avx512(const std::uint16_t* src, float* dst,
                                                      std::size_t n, float scale) {
  const __m512 s = _mm512_set1_ps(scale);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_mul_ps(widen16_bf16(src + i), s));
  // Widening is exact, so the scalar tail computes the very same products.
  widen_scaled_bf16_scalar(src + i, dst + i, n - i, scale);
}

RINGTRAIN_AVX512_TARGET void widen_add_bf16_avx512(const std::uint16_t* src, float* dst,
                                                   std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_add_ps(_mm512_loadu_ps(dst + i), widen16_bf16(src + i)));
  widen_add_bf16_scalar(src + i, dst + i, n - i);
}

// ---- F16C (fp16) --------------------------------------------------------------------

RINGTRAIN_F16C_TARGET void narrow8_fp16(const float* src, std::uint16_t* dst) {
  const __m128i h =
      _mm256_cvtps_ph(_mm256_loadu_ps(src), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), h);
}

RINGTRAIN_F16C_TARGET void narrow_fp16_f16c(const float* src, std::uint16_t* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) narrow8_fp16(src + i, dst + i);
  if (i < n) {
    float in[8] = {};
    std::uint16_t out[8];
    std::memcpy(in, src + i, (n - i) * sizeof(float));
    narrow8_fp16(in, out);
    std::memcpy(dst + i, out, (n - i) * sizeof(std::uint16_t));
  }
}

RINGTRAIN_F16C_TARGET __m256 widen8_fp16(const std::uint16_t* src) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
}

// The tails also go through VCVTPH2PS (on a padded copy): its NaN handling is the
// instruction's, whatever the scalar reference does.
RINGTRAIN_F16C_TARGET void widen8_fp16_tail(const std::uint16_t* src, std::size_t n, float* out) {
  std::uint16_t in[8] = {};
  std::memcpy(in, src, n * sizeof(std::uint16_t));
  _mm256_storeu_ps(out, widen8_fp16(in));
}

RINGTRAIN_F16C_TARGET void widen_scaled_fp16_f16c(const std::uint16_t* src, float* dst,
                                                  std::size_t n, float scale) {
  const __m256 s = _mm256_set1_ps(scale);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_mul_ps(widen8_fp16(src + i), s));
  if (i < n) {
    float out[8];
    widen8_fp16_tail(src + i, n - i, out);
    for (std::size_t k = 0; k < n - i; ++k) dst[i + k] = out[k] * scale;
  }
}

RINGTRAIN_F16C_TARGET void widen_add_fp16_f16c(const std::uint16_t* src, float* dst,
                                               std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_add_ps(_mm256_loadu_ps(dst + i), widen8_fp16(src + i)));
  if (i < n) {
    float out[8];
    widen8_fp16_tail(src + i, n - i, out);
    for (std::size_t k = 0; k < n - i; ++k) dst[i + k] += out[k];
  }
}

void check_format(Compression format) {
  if (format != Compression::kBf16 && format != Compression::kFp16) {
    throw std::invalid_argument("16-bit conversion: format must be bf16 or fp16, got " +
                                std::string(compression_name(format)));
  }
}

}  // namespace

std::uint16_t float_to_bf16(float value) {
  const std::uint32_t bits = bits_of(value);
  const std::uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN
  // Subnormal inputs are read as zero (VCVTNEPS2BF16 does not consult MXCSR and flushes).
  if ((abs & 0x7F800000u) == 0) return static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  // Round to nearest even on the 16 bits dropped; a carry may reach the exponent, and
  // from the largest finite values into infinity, as in IEEE rounding.
  const std::uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

float bf16_to_float(std::uint16_t code) { return float_of(static_cast<std::uint32_t>(code) << 16); }

std::uint16_t float_to_fp16(float value) {
  const std::uint32_t bits = bits_of(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) {
    // Infinity stays infinity; a NaN keeps the top of its payload and becomes quiet.
    if (abs == 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7C00u);
    return static_cast<std::uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));
  }
  // 65520 is halfway between 65504 (the largest half) and 2^16; ties go to even, which
  // is infinity.
  if (abs >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);
  if (abs < 0x38800000u) {
    // Below 2^-14: a half subnormal, in units of 2^-24. value = m * 2^(e - 150).
    const std::uint32_t e = abs >> 23;
    if (e == 0) return static_cast<std::uint16_t>(sign);  // fp32 subnormals are < 2^-126
    const std::uint32_t m = (abs & 0x7FFFFFu) | 0x800000u;
    const std::uint32_t shift = 126 - e;  // >= 14
    if (shift > 24) return static_cast<std::uint16_t>(sign);
    std::uint32_t r = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1);
    const std::uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<std::uint16_t>(sign | r);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits; a
  // carry moves into the exponent correctly.
  std::uint32_t r = (abs - 0x38000000u) >> 13;
  const std::uint32_t rem = abs & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<std::uint16_t>(sign | r);
}

float fp16_to_float(std::uint16_t code) {
  const std::uint32_t sign = static_cast<std::uint32_t>(code & 0x8000u) << 16;
  const std::uint32_t exponent = (code >> 10) & 0x1Fu;
  const std::uint32_t mantissa = code & 0x3FFu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in fp32.
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return float_of(sign | bits_of(magnitude));
  }
  if (exponent == 31) {
    // Infinity, or a NaN made quiet as VCVTPH2PS does.
    return float_of(sign | 0x7F800000u | (mantissa != 0 ? 0x400000u : 0u) | (mantissa << 13));
  }
  return float_of(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

bool half_vectorised(Compression format) {
  if (format == Compression::kBf16) return cpu_has_bf16();
  if (format == Compression::kFp16) return cpu_has_f16c();
  return false;
}

void narrow(Compression format, const float* src, std::uint16_t* dst, std::size_t count,
            HalfPath path) {
  check_format(format);
  const bool vector = path == HalfPath::kBest && half_vectorised(format);
  if (format == Compression::kBf16) {
    vector ? narrow_bf16_avx512(src, dst, count) : narrow_bf16_scalar(src, dst, count);
  } else {
    vector ? narrow_fp16_f16c(src, dst, count) : narrow_fp16_scalar(src, dst, count);
  }
}

void widen_scaled(Compression format, const std::uint16_t* src, float* dst, std::size_t count,
                  float scale, HalfPath path) {
  check_format(format);
  if (format == Compression::kBf16) {
    path == HalfPath::kBest && cpu_has_avx512f()
        ? widen_scaled_bf16_avx512(src, dst, count, scale)
        : widen_scaled_bf16_scalar(src, dst, count, scale);
  } else {
    path == HalfPath::kBest && cpu_has_f16c() ? widen_scaled_fp16_f16c(src, dst, count, scale)
                                              : widen_scaled_fp16_scalar(src, dst, count, scale);
  }
}

void widen_add(Compression format, const std::uint16_t* src, float* dst, std::size_t count,
               HalfPath path) {
  check_format(format);
  if (format == Compression::kBf16) {
    path == HalfPath::kBest && cpu_has_avx512f() ? widen_add_bf16_avx512(src, dst, count)
                                                 : widen_add_bf16_scalar(src, dst, count);
  } else {
    path == HalfPath::kBest && cpu_has_f16c() ? widen_add_fp16_f16c(src, dst, count)
                                              : widen_add_fp16_scalar(src, dst, count);
  }
}

}  // namespace ringtrain
