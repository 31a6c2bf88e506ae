// LARS, layer-wise adaptive rate scaling (You, Gitman & Ginsburg 2017, "Large Batch
// Training of Convolutional Networks", arXiv:1708.03888, Algorithm 1), over the flat buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "optim/Optimizer.h"
#include "optim/ParamSegments.h"

namespace ringtrain {

// Per weight tensor w (ParamKind::kWeight) with gradient g, global lr, weight decay beta:
//   trust = eta * ||w|| / (||g|| + beta * ||w||)   (1 if ||w|| = 0 or ||g|| = 0)
//   v = momentum * v + lr * trust * (g + beta * w)
//   w -= v
// Biases and BatchNorm scale/shift are excluded from the trust ratio and from weight
// decay (trust = 1, beta = 0), as in the paper. The momentum buffer holds the lr-scaled
// step, as in Algorithm 1 (and TensorFlow's LARSOptimizer); without momentum w -= the
// same scaled step. Norms are summed in double.
class Lars final : public Optimizer {
 public:
  // Expects a validated config (Optimizer::create validates); throws
  // std::invalid_argument for a bad parameter layout.
  Lars(const OptimizerConfig& config, std::span<const ParamInfo> params,
       std::size_t num_params);

  void step(std::span<float> params, std::span<const float> grads, double lr) override;
  std::span<float> state() noexcept override { return momentum_buf_; }
  std::uint64_t steps_taken() const noexcept override { return steps_; }
  void set_steps_taken(std::uint64_t steps) noexcept override { steps_ = steps; }
  std::string name() const override { return "lars"; }

 private:
  float momentum_;
  double weight_decay_;
  double eta_;
  std::size_t num_params_;
  std::vector<ParamSegment> segments_;  // one per tensor; flag: trust ratio and decay apply
  std::vector<float> momentum_buf_;     // num_params floats, empty without momentum
  std::uint64_t steps_ = 0;
};

}  // namespace ringtrain
