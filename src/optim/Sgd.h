// Stochastic gradient descent with momentum, dampening, Nesterov and L2 weight decay, with
// exactly torch.optim.SGD's update, over the flat parameter buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "optim/Optimizer.h"
#include "optim/ParamSegments.h"

namespace ringtrain {

// Per parameter, with wd = 0 for exempt tensors (OptimizerConfig::decay_biases):
//   d = g + wd * p
//   buf = d on the first step, else momentum * buf + (1 - dampening) * d
//   u = d + momentum * buf (nesterov) or buf;  (u = d without momentum)
//   p -= lr * u
class Sgd final : public Optimizer {
 public:
  // Expects a validated config (Optimizer::create validates); throws
  // std::invalid_argument for a bad parameter layout.
  Sgd(const OptimizerConfig& config, std::span<const ParamInfo> params,
      std::size_t num_params);

  void step(std::span<float> params, std::span<const float> grads, double lr) override;
  std::span<float> state() noexcept override { return momentum_buf_; }
  std::uint64_t steps_taken() const noexcept override { return steps_; }
  void set_steps_taken(std::uint64_t steps) noexcept override { steps_ = steps; }
  std::string name() const override { return "sgd"; }

 private:
  float momentum_;
  float dampening_;
  float weight_decay_;
  bool nesterov_;
  std::size_t num_params_;
  std::vector<ParamSegment> segments_;  // flag: weight decay applies
  std::vector<float> momentum_buf_;     // num_params floats, empty without momentum
  std::uint64_t steps_ = 0;
};

}  // namespace ringtrain
