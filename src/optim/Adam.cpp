// Adam/AdamW update loops, processed in L1-sized chunks so the square root runs as a
// vector instruction even though the default -fmath-errno keeps GCC from vectorising a
// loop that calls std::sqrt (measured: the fused scalar loop was ~2.5x slower).
#include "optim/Adam.h"

#include <algorithm>
#include <cmath>

#include <immintrin.h>

#include "common/CpuDispatch.h"

namespace ringtrain {
namespace {

// x[i] = sqrt(x[i]) for x[i] >= 0; correctly rounded either way (IEEE sqrt), so the AVX and
// the scalar loop agree bit for bit. 256-bit only: GCC 12's _mm512_sqrt_ps trips
// -Wmaybe-uninitialized, and the loop is memory bound. AVX is chosen at run time, so the
// portable build uses it too.
__attribute__((target("avx"))) std::size_t sqrt_in_place_avx(float* x, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
  return i;
}

void sqrt_in_place(float* x, std::size_t n) {
  static const bool avx = __builtin_cpu_supports("avx");
  std::size_t i = avx ? sqrt_in_place_avx(x, n) : 0;
  for (; i < n; ++i) x[i] = std::sqrt(x[i]);
}

struct AdamScalars {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float wd;         // L2 decay added to the gradient (adam); 0 for adamw
  float step_size;  // lr / (1 - beta1^t)
  float bc2_sqrt;   // sqrt(1 - beta2^t)
  float eps;
};

// p, g, m, v: n floats of one segment. An AVX2 and a baseline clone (common/CpuDispatch.h) with
// the same bits: each element is correctly rounded multiplies, adds, a square root and a
// division, and this library is compiled without FMA contraction (src/CMakeLists.txt).
RINGTRAIN_STREAM_CLONES void adam_update(float* __restrict p, const float* __restrict g, float* __restrict m,
                 float* __restrict v, std::size_t n, const AdamScalars& s) {
  constexpr std::size_t kChunk = 512;  // 2 KiB of denominators stay in L1
  alignas(64) float denom[kChunk];
  for (std::size_t c = 0; c < n; c += kChunk) {
    const std::size_t len = std::min(kChunk, n - c);
    float* pc = p + c;
    const float* gc = g + c;
    float* mc = m + c;
    float* vc = v + c;
    for (std::size_t i = 0; i < len; ++i) {
      const float gi = gc[i] + s.wd * pc[i];
      mc[i] = s.beta1 * mc[i] + s.one_minus_beta1 * gi;
      const float vi = s.beta2 * vc[i] + s.one_minus_beta2 * gi * gi;
      vc[i] = vi;
      denom[i] = vi;
    }
    sqrt_in_place(denom, len);
    for (std::size_t i = 0; i < len; ++i) {
      pc[i] -= s.step_size * mc[i] / (denom[i] / s.bc2_sqrt + s.eps);
    }
  }
}

RINGTRAIN_STREAM_CLONES void scale(float* __restrict p, std::size_t n, float factor) {
  for (std::size_t i = 0; i < n; ++i) p[i] *= factor;
}

}  // namespace

Adam::Adam(const OptimizerConfig& config, std::span<const ParamInfo> params,
           std::size_t num_params)
    : decoupled_(config.name == "adamw"),
      beta1_(config.beta1),
      beta2_(config.beta2),
      eps_(static_cast<float>(config.eps)),
      weight_decay_(config.weight_decay),
      num_params_(num_params),
      segments_(param_segments(params, num_params, !config.decay_biases, true)),
      moments_(2 * num_params, 0.0f) {}

void Adam::step(std::span<float> params, std::span<const float> grads, double lr) {
  check_step_args(name(), params.size(), grads.size(), num_params_, lr);
  ++steps_;
  // Bias corrections in double, as PyTorch computes them on Python floats.
  const double t = static_cast<double>(steps_);
  AdamScalars s{};
  s.beta1 = static_cast<float>(beta1_);
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1_);
  s.beta2 = static_cast<float>(beta2_);
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2_);
  s.step_size = static_cast<float>(lr / (1.0 - std::pow(beta1_, t)));
  s.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2_, t)));
  s.eps = eps_;
  const float decoupled_factor = static_cast<float>(1.0 - lr * weight_decay_);

  float* m = moments_.data();
  float* v = moments_.data() + num_params_;
  for (const ParamSegment& seg : segments_) {
    const bool decay = seg.flag && weight_decay_ != 0;
    s.wd = (!decoupled_ && decay) ? static_cast<float>(weight_decay_) : 0.0f;
    for_each_block(seg.offset, seg.count, [&](std::size_t offset, std::size_t n) {
      float* p = params.data() + offset;
      if (decoupled_ && decay) scale(p, n, decoupled_factor);
      adam_update(p, grads.data() + offset, m + offset, v + offset, n, s);
    });
  }
}

}  // namespace ringtrain
