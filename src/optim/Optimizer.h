// Optimizers over the flat parameter buffer. State (momentum, Adam moments) mirrors the
// parameter layout, indexed by offset, so a checkpoint saves and restores it exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nn/ParamInfo.h"

namespace ringtrain {

struct OptimizerConfig {
  std::string name = "sgd";  // sgd | adam | adamw | lars
  double momentum = 0.9;     // sgd, lars
  bool nesterov = false;     // sgd
  double weight_decay = 0.0;
  double beta1 = 0.9;        // adam, adamw
  double beta2 = 0.999;
  double eps = 1e-8;
  double lars_eta = 0.001;   // lars trust coefficient
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // Builds the named optimizer for a model's parameter layout. Throws
  // std::invalid_argument for an unknown name or an out-of-range hyper-parameter.
  static std::unique_ptr<Optimizer> create(const OptimizerConfig& config,
                                           std::span<const ParamInfo> params,
                                           std::size_t num_params);

  // One update: params -= f(grads, state, lr). grads are already averaged over ranks.
  virtual void step(std::span<float> params, std::span<const float> grads, double lr) = 0;

  // The whole optimizer state as one flat float span (possibly empty), and the number of
  // steps taken (Adam's bias correction): what a checkpoint stores.
  virtual std::span<float> state() noexcept = 0;
  virtual std::uint64_t steps_taken() const noexcept = 0;
  virtual void set_steps_taken(std::uint64_t steps) noexcept = 0;

  virtual std::string name() const = 0;
};

}  // namespace ringtrain
