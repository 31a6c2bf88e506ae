// oneDNN's row-major sgemm with alpha 1, throwing on failure: the products under nn's own
// convolution kernels (nn/Winograd, nn/PixelPairConv). Internal to nn/.
#pragma once

#include <cstdint>
#include <stdexcept>

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.h>

namespace ringtrain::detail {

// c = op(a) op(b) + beta c, row-major, op(x) = x or x^T as ta / tb are 'N' or 'T'.
inline void sgemm(char ta, char tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
                  const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (dnnl_sgemm(ta, tb, m, n, k, 1.f, a, lda, b, ldb, beta, c, ldc) != dnnl_success)
    throw std::runtime_error(fmt::format("nn: dnnl_sgemm failed ({}x{}x{})", m, n, k));
}

}  // namespace ringtrain::detail
