// fp32 <-> 16-bit conversions of the compressed all-reduce transport (bf16 and IEEE
// fp16), one value at a time (the scalar reference) and over arrays, vectorised with
// AVX-512 BF16 / AVX-512F / F16C when the CPU has them (checked at run time) and scalar
// otherwise. Both paths give bit-identical codes, so ranks on different CPUs agree.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/Compression.h"

namespace ringtrain {

// Round to nearest even. Matches VCVTNEPS2BF16: an fp32 subnormal becomes a signed zero,
// a NaN a quiet NaN.
std::uint16_t float_to_bf16(float value);
float bf16_to_float(std::uint16_t code);
// Round to nearest even with IEEE subnormals; |value| >= 65520 becomes infinity, a NaN a
// quiet NaN (as VCVTPS2PH does).
std::uint16_t float_to_fp16(float value);
float fp16_to_float(std::uint16_t code);

// Which array kernels run: kBest takes the vector units the CPU has, kScalar forces the
// scalar loops (the fallback on other CPUs; tests compare the two).
enum class HalfPath { kBest, kScalar };

// True when kBest runs vector code for this format on this CPU.
bool half_vectorised(Compression format);

// `format` is kBf16 or kFp16 (std::invalid_argument otherwise).
// dst[i] = code(src[i])
void narrow(Compression format, const float* src, std::uint16_t* dst, std::size_t count,
            HalfPath path = HalfPath::kBest);
// dst[i] = value(src[i]) * scale   (the product in fp32)
void widen_scaled(Compression format, const std::uint16_t* src, float* dst, std::size_t count,
                  float scale, HalfPath path = HalfPath::kBest);
// dst[i] += value(src[i])   (the addition in fp32)
void widen_add(Compression format, const std::uint16_t* src, float* dst, std::size_t count,
               HalfPath path = HalfPath::kBest);

}  // namespace ringtrain
