// SGD update loops; one branch-free loop per (first step, nesterov) case so each vectorises,
// as an AVX2 and a baseline clone (RINGTRAIN_STREAM_CLONES, common/CpuDispatch.h). The clones
// give the same bits: every element is a fixed sequence of correctly rounded multiplies and
// adds, and the optim library is compiled with -ffp-contract=off (src/CMakeLists.txt).
// Why not the baseline SSE loop alone: on the Zen 5 build machine its speed depended on the
// machine code GCC happened to emit and where the linker put it. After the update observer
// wrapped it in a lambda (no change to the arithmetic), GCC ordered the same 14 instructions
// differently and the loop head moved from byte 16 to byte 1 of a 64-byte line; mlp's fp32
// update took 0.70 instead of 0.44 ms a step (p10 of per-step times). Copies of the two loops
// timed at every offset ran at 0.173, 0.211 or 0.279 ns a float in cache depending on the
// offset alone. The AVX2 clone ran at 0.16 ns at every offset, and mlp's update at 0.43 ms.
#include "optim/Sgd.h"
#include "optim/Sgd.h"

#include "common/CpuDispatch.h"

namespace ringtrain {
namespace {

// p, g, buf: n floats of one segment. keep = 1 - dampening.
template <bool kFirst, bool kNesterov>
RINGTRAIN_STREAM_CLONES void sgd_momentum(float* __restrict p, const float* __restrict g, float* __restrict buf,
                  std::size_t n, float lr, float wd, float momentum, float keep) {
  for (std::size_t i = 0; i < n; ++i) {
    const float d = g[i] + wd * p[i];
    const float b = kFirst ? d : momentum * buf[i] + keep * d;
    buf[i] = b;
    p[i] -= lr * (kNesterov ? d + momentum * b : b);
  }
}

RINGTRAIN_STREAM_CLONES void sgd_plain(float* __restrict p, const float* __restrict g, std::size_t n, float lr,
               float wd) {
  for (std::size_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + wd * p[i]);
}

}  // namespace

Sgd::Sgd(const OptimizerConfig& config, std::span<const ParamInfo> params,
         std::size_t num_params)
    : momentum_(static_cast<float>(config.momentum)),
      dampening_(static_cast<float>(config.dampening)),
      weight_decay_(static_cast<float>(config.weight_decay)),
      nesterov_(config.nesterov),
      num_params_(num_params),
      segments_(param_segments(params, num_params, !config.decay_biases, true)),
      momentum_buf_(config.momentum > 0 ? num_params : 0, 0.0f) {}

void Sgd::step(std::span<float> params, std::span<const float> grads, double lr) {
  check_step_args("sgd", params.size(), grads.size(), num_params_, lr);
  const float lr_f = static_cast<float>(lr);
  const float keep = 1.0f - dampening_;
  const bool first = steps_ == 0;
  for (const ParamSegment& s : segments_) {
    const float wd = s.flag ? weight_decay_ : 0.0f;
    for_each_block(s.offset, s.count, [&](std::size_t offset, std::size_t n) {
      float* p = params.data() + offset;
      const float* g = grads.data() + offset;
      if (momentum_buf_.empty()) return sgd_plain(p, g, n, lr_f, wd);
      float* buf = momentum_buf_.data() + offset;
      if (first && nesterov_) sgd_momentum<true, true>(p, g, buf, n, lr_f, wd, momentum_, keep);
      else if (first) sgd_momentum<true, false>(p, g, buf, n, lr_f, wd, momentum_, keep);
      else if (nesterov_) sgd_momentum<false, true>(p, g, buf, n, lr_f, wd, momentum_, keep);
      else sgd_momentum<false, false>(p, g, buf, n, lr_f, wd, momentum_, keep);
    });
  }
  ++steps_;
}

}  // namespace ringtrain
