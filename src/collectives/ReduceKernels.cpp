// Auto-vectorised reduction loops (see ReduceKernels.h), one clone per vector ISA.
#include "collectives/ReduceKernels.h"

#include "common/CpuDispatch.h"

namespace ringtrain {

RINGTRAIN_VECTOR_CLONES void reduce_add(float* __restrict dst, const float* __restrict src, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) dst[i] += src[i];
}

RINGTRAIN_VECTOR_CLONES void reduce_add_scale(float* __restrict dst, const float* __restrict src, std::size_t count,
                      float scale) {
  // Sum first, then scale: the same rounding as a sum all-reduce followed by a scale pass.
  for (std::size_t i = 0; i < count; ++i) dst[i] = (dst[i] + src[i]) * scale;
}

RINGTRAIN_VECTOR_CLONES void scale_in_place(float* dst, std::size_t count, float scale) {
  for (std::size_t i = 0; i < count; ++i) dst[i] *= scale;
}

}  // namespace ringtrain
