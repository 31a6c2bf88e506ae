// The element-wise float kernels of the all-reduce algorithms. Plain loops over
// __restrict pointers that GCC auto-vectorises, compiled for AVX-512F, AVX2 and the baseline
// with the CPU's best chosen at run time (common/CpuDispatch.h; checked with -fopt-info-vec);
// kept in their own translation unit so that check is easy to repeat.
#pragma once

#include <cstddef>

namespace ringtrain {

// dst[i] += src[i]
void reduce_add(float* __restrict dst, const float* __restrict src, std::size_t count);
// dst[i] = (dst[i] + src[i]) * scale   (the last reduction of a mean all-reduce)
void reduce_add_scale(float* __restrict dst, const float* __restrict src, std::size_t count,
                      float scale);
// dst[i] *= scale
void scale_in_place(float* dst, std::size_t count, float scale);

}  // namespace ringtrain
