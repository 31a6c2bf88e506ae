// Adam (Kingma & Ba 2015) with L2 weight decay, and AdamW (Loshchilov & Hutter 2019) with
// decoupled weight decay, with torch.optim.Adam/AdamW's update over the flat buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "optim/Optimizer.h"
#include "optim/ParamSegments.h"

namespace ringtrain {

// Step t (1-based), per parameter, with wd = 0 for exempt tensors (decay_biases):
//   adam:  g = g + wd * p            adamw: p = p * (1 - lr * wd)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
class Adam final : public Optimizer {
 public:
  // config.name "adam" or "adamw" chooses the decay. Expects a validated config
  // (Optimizer::create validates); throws std::invalid_argument for a bad layout.
  Adam(const OptimizerConfig& config, std::span<const ParamInfo> params,
       std::size_t num_params);

  void step(std::span<float> params, std::span<const float> grads, double lr) override;
  // m (num_params floats) then v (num_params floats).
  std::span<float> state() noexcept override { return moments_; }
  std::uint64_t steps_taken() const noexcept override { return steps_; }
  void set_steps_taken(std::uint64_t steps) noexcept override { steps_ = steps; }
  std::string name() const override { return decoupled_ ? "adamw" : "adam"; }

 private:
  bool decoupled_;
  double beta1_;
  double beta2_;
  float eps_;
  double weight_decay_;
  std::size_t num_params_;
  std::vector<ParamSegment> segments_;  // flag: weight decay applies
  std::vector<float> moments_;          // [m | v], 2 * num_params floats
  std::uint64_t steps_ = 0;
};

}  // namespace ringtrain
