// LARS: per-tensor norms, trust ratio, then a momentum update with the local lr.
#include "optim/Lars.h"

#include <cmath>

#include "common/CpuDispatch.h"

namespace ringtrain {
namespace {

// Sum of x[i]^2 in double, over 8 independent partial sums so the loop pipelines and
// the result does not depend on anything but n and the data.
double sum_squares(const float* x, std::size_t n) {
  constexpr std::size_t kLanes = 8;
  double acc[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (std::size_t j = 0; j < kLanes; ++j) {
      const double xi = x[i + j];
      acc[j] += xi * xi;
    }
  }
  double total = 0;
  for (; i < n; ++i) total += static_cast<double>(x[i]) * x[i];
  for (double a : acc) total += a;
  return total;
}

// The update loops, as an AVX2 and a baseline clone with the same bits (as Sgd.cpp's: no FMA
// contraction in this library); the norms above keep their own summation order.
RINGTRAIN_STREAM_CLONES void lars_momentum(float* __restrict p, const float* __restrict g, float* __restrict buf,
                   std::size_t n, float local_lr, float wd, float momentum) {
  for (std::size_t i = 0; i < n; ++i) {
    const float b = momentum * buf[i] + local_lr * (g[i] + wd * p[i]);
    buf[i] = b;
    p[i] -= b;
  }
}

RINGTRAIN_STREAM_CLONES void lars_plain(float* __restrict p, const float* __restrict g, std::size_t n,
                float local_lr, float wd) {
  for (std::size_t i = 0; i < n; ++i) p[i] -= local_lr * (g[i] + wd * p[i]);
}

}  // namespace

Lars::Lars(const OptimizerConfig& config, std::span<const ParamInfo> params,
           std::size_t num_params)
    : momentum_(static_cast<float>(config.momentum)),
      weight_decay_(config.weight_decay),
      eta_(config.lars_eta),
      num_params_(num_params),
      segments_(param_segments(params, num_params, true, false)),
      momentum_buf_(config.momentum > 0 ? num_params : 0, 0.0f) {}

void Lars::step(std::span<float> params, std::span<const float> grads, double lr) {
  check_step_args("lars", params.size(), grads.size(), num_params_, lr);
  for (const ParamSegment& s : segments_) {
    float* p = params.data() + s.offset;
    const float* g = grads.data() + s.offset;
    double trust = 1.0;
    double wd = 0.0;
    if (s.flag) {
      wd = weight_decay_;
      const double w_norm = std::sqrt(sum_squares(p, s.count));
      const double g_norm = std::sqrt(sum_squares(g, s.count));
      if (w_norm > 0 && g_norm > 0) trust = eta_ * w_norm / (g_norm + wd * w_norm);
    }
    const float local_lr = static_cast<float>(lr * trust);
    const float wd_f = static_cast<float>(wd);
    for_each_block(s.offset, s.count, [&](std::size_t offset, std::size_t n) {
      float* pb = params.data() + offset;
      const float* gb = grads.data() + offset;
      if (momentum_buf_.empty()) return lars_plain(pb, gb, n, local_lr, wd_f);
      lars_momentum(pb, gb, momentum_buf_.data() + offset, n, local_lr, wd_f, momentum_);
    });
  }
  ++steps_;
}

}  // namespace ringtrain
