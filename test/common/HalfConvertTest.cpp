// bf16 / fp16 conversions: the scalar reference against independent definitions (nearest
// representable value, GCC's _Float16), the vector kernels against the scalar ones bit for
// bit (so ranks on CPUs with and without AVX-512 BF16 / F16C agree), round trips and
// error bounds.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/HalfConvert.h"

using namespace ringtrain;

namespace {

std::uint32_t bits_of(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, sizeof(b));
  return b;
}

float float_of(std::uint32_t b) {
  float v;
  std::memcpy(&v, &b, sizeof(v));
  return v;
}

// fp32 bit patterns covering every exponent: a stride through all 2^32, special values,
// fp16's limits and the halfway points of both formats.
std::vector<float> probe_values() {
  std::vector<float> values;
  for (std::uint64_t b = 0; b < (1ull << 32); b += 40009) values.push_back(float_of(static_cast<std::uint32_t>(b)));
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) values.push_back(float_of(rng()));
  const float specials[] = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65520.0f, -65520.0f,
                            65536.0f, 6.103515625e-05f, 5.9604644775390625e-08f,
                            2.98023223876953125e-08f, 2.98023224e-08f, 1e-45f, 1e-40f,
                            std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::signaling_NaN(), 1.00390625f, 1.01171875f,
                            1.0009765625f, 1.0029296875f};
  for (float v : specials) values.push_back(v);
  // Exact halfway points between neighbouring bf16 values and neighbouring fp16 values.
  for (std::uint32_t b = 0x3F800000u; b < 0x3F810000u; b += 0x1000u) values.push_back(float_of(b | 0x8000u));
  for (std::uint32_t b = 0x38000000u; b < 0x47800000u; b += 0x00400000u) values.push_back(float_of(b | 0x1000u));
  return values;
}

// The bf16 nearest to an fp32 normal (ties to even), from distances in double. As in
// IEEE rounding, infinity counts as 2^128 when deciding whether the largest values overflow.
std::uint16_t nearest_bf16(float v) {
  const std::uint32_t b = bits_of(v);
  const std::uint32_t lo = b & 0xFFFF0000u;
  const std::uint32_t hi = lo + 0x10000u;
  const double v_hi = (hi & 0x7FFFFFFFu) == 0x7F800000u ? std::copysign(std::ldexp(1.0, 128), v)
                                                         : static_cast<double>(float_of(hi));
  const double d_lo = std::fabs(static_cast<double>(float_of(lo)) - v);
  const double d_hi = std::fabs(v_hi - v);
  if (d_lo < d_hi) return static_cast<std::uint16_t>(lo >> 16);
  if (d_hi < d_lo) return static_cast<std::uint16_t>(hi >> 16);
  return static_cast<std::uint16_t>(((lo >> 16) & 1u) ? hi >> 16 : lo >> 16);
}

bool is_nan16(std::uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0; }

}  // namespace

TEST_CASE("bf16 narrowing is round-to-nearest-even, subnormals flush, NaN stays NaN") {
  for (float v : probe_values()) {
    const std::uint32_t b = bits_of(v);
    const std::uint16_t h = float_to_bf16(v);
    if (std::isnan(v)) {
      CHECK(std::isnan(bf16_to_float(h)));
    } else if ((b & 0x7F800000u) == 0) {
      CHECK(h == ((b >> 16) & 0x8000u));
    } else if (std::isinf(v)) {
      CHECK(bf16_to_float(h) == v);
    } else {
      INFO("value bits " << b);
      REQUIRE(h == nearest_bf16(v));
      // Relative error of RNE with 8 significant bits: at most 2^-8 (a finite result).
      if (std::isfinite(bf16_to_float(h)))
        CHECK(std::fabs(static_cast<double>(bf16_to_float(h)) - v) <= std::ldexp(std::fabs(static_cast<double>(v)), -8));
    }
  }
  // Every bf16 code widens exactly and narrows back to itself (subnormals and NaNs aside).
  for (std::uint32_t code = 0; code < 0x10000u; ++code) {
    const auto h = static_cast<std::uint16_t>(code);
    CHECK(bits_of(bf16_to_float(h)) == code << 16);
    const bool subnormal = (code & 0x7F80u) == 0 && (code & 0x7Fu) != 0;
    if (!subnormal && !std::isnan(bf16_to_float(h))) CHECK(float_to_bf16(bf16_to_float(h)) == h);
  }
}

TEST_CASE("fp16 narrowing matches the IEEE conversion, overflowing to inf from 65520") {
  for (float v : probe_values()) {
    const std::uint16_t h = float_to_fp16(v);
    if (std::isnan(v)) {
      CHECK(is_nan16(h));
      continue;
    }
#ifdef __FLT16_MAX__
    // GCC's _Float16 conversion (libgcc, IEEE round to nearest even) is the reference.
    const _Float16 reference = static_cast<_Float16>(v);
    std::uint16_t expected;
    std::memcpy(&expected, &reference, sizeof(expected));
    INFO("value " << v << " bits " << bits_of(v));
    REQUIRE(h == expected);
#endif
    const float back = fp16_to_float(h);
    if (std::fabs(v) >= 65520.0f) {
      CHECK(std::isinf(back));
    } else if (std::fabs(v) >= 6.103515625e-05f) {
      CHECK(std::fabs(static_cast<double>(back) - v) <= std::ldexp(std::fabs(static_cast<double>(v)), -11));
    } else {
      CHECK(std::fabs(static_cast<double>(back) - v) <= std::ldexp(1.0, -25));  // half a subnormal step
    }
  }
  CHECK(float_to_fp16(65504.0f) == 0x7BFFu);
  CHECK(float_to_fp16(65519.0f) == 0x7BFFu);
  CHECK(float_to_fp16(65520.0f) == 0x7C00u);
  for (std::uint32_t code = 0; code < 0x10000u; ++code) {
    const auto h = static_cast<std::uint16_t>(code);
    if (!is_nan16(h)) CHECK(float_to_fp16(fp16_to_float(h)) == h);
  }
}

TEST_CASE("vector and scalar kernels give the same bits, tails included") {
  for (Compression format : {Compression::kBf16, Compression::kFp16}) {
    INFO("format " << compression_name(format) << " vectorised on this CPU: "
                   << half_vectorised(format));
    if (!half_vectorised(format)) WARN("no vector unit for this format here: scalar path only");
    const std::vector<float> values = probe_values();
    std::vector<std::uint16_t> vec(values.size()), ref(values.size());
    narrow(format, values.data(), vec.data(), values.size(), HalfPath::kBest);
    narrow(format, values.data(), ref.data(), values.size(), HalfPath::kScalar);
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < values.size(); ++i) mismatches += vec[i] != ref[i];
    CHECK(mismatches == 0);

    // Every 16-bit code, widened, scaled, added.
    std::vector<std::uint16_t> codes(0x10000);
    for (std::uint32_t c = 0; c < 0x10000u; ++c) codes[c] = static_cast<std::uint16_t>(c);
    for (std::size_t n : {0u, 1u, 7u, 8u, 15u, 16u, 17u, 33u, 1000u, 0x10000u}) {
      for (float scale : {1.0f, 0.25f, 1.0f / 3.0f}) {
        std::vector<float> a(n, -1.0f), b(n, -1.0f);
        widen_scaled(format, codes.data(), a.data(), n, scale, HalfPath::kBest);
        widen_scaled(format, codes.data(), b.data(), n, scale, HalfPath::kScalar);
        bool same = true;
        for (std::size_t i = 0; i < n; ++i)
          same = same && (bits_of(a[i]) == bits_of(b[i]) || (std::isnan(a[i]) && std::isnan(b[i])));
        CHECK(same);
      }
      std::vector<float> a(n), b(n);
      for (std::size_t i = 0; i < n; ++i) a[i] = b[i] = static_cast<float>(i % 13) - 6.5f;
      widen_add(format, codes.data(), a.data(), n, HalfPath::kBest);
      widen_add(format, codes.data(), b.data(), n, HalfPath::kScalar);
      bool same = true;
      for (std::size_t i = 0; i < n; ++i)
        same = same && (bits_of(a[i]) == bits_of(b[i]) || (std::isnan(a[i]) && std::isnan(b[i])));
      CHECK(same);
    }
  }
  // fp16 widening is exact: code -> float -> code for every non-NaN code, on both paths.
  std::vector<std::uint16_t> codes(0x10000);
  for (std::uint32_t c = 0; c < 0x10000u; ++c) codes[c] = static_cast<std::uint16_t>(c);
  std::vector<float> wide(codes.size());
  widen_scaled(Compression::kFp16, codes.data(), wide.data(), codes.size(), 1.0f);
  std::size_t bad = 0;
  for (std::uint32_t c = 0; c < 0x10000u; ++c)
    if (!is_nan16(codes[c]) && bits_of(wide[c]) != bits_of(fp16_to_float(codes[c]))) ++bad;
  CHECK(bad == 0);
  CHECK_THROWS_AS(narrow(Compression::kNone, nullptr, nullptr, 0), std::invalid_argument);
}
