// Optimizers over the flat parameter buffer. State (momentum, Adam moments) mirrors the
// parameter layout, indexed by offset, so a checkpoint saves and restores it exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nn/ParamInfo.h"

namespace ringtrain {

struct OptimizerConfig {
  std::string name = "sgd";  // sgd | adam | adamw | lars
  double momentum = 0.9;     // sgd, lars; 0 = no momentum buffer
  bool nesterov = false;     // sgd (needs momentum > 0 and dampening 0, as in PyTorch)
  double weight_decay = 0.0;
  double beta1 = 0.9;        // adam, adamw
  double beta2 = 0.999;
  double eps = 1e-8;
  double lars_eta = 0.001;   // lars trust coefficient
  double dampening = 0.0;    // sgd: buf = momentum * buf + (1 - dampening) * g
  // sgd, adam, adamw: weight decay applies to every parameter, as PyTorch does without
  // parameter groups. false exempts biases and BatchNorm scale/shift (every ParamKind but
  // kWeight). lars ignores this: it always exempts them (You et al. 2017).
  bool decay_biases = true;
};

// Throws std::invalid_argument, naming the option, for an unknown optimizer name or an
// out-of-range or inapplicable hyper-parameter. create() calls it; a CLI may call it early.
void validate_optimizer_config(const OptimizerConfig& config);

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // Builds the named optimizer for a model's parameter layout. Throws
  // std::invalid_argument for an unknown name or an out-of-range hyper-parameter, or for
  // parameter ranges that leave [0, num_params) or overlap. Floats that no range covers
  // (alignment padding) are never touched.
  static std::unique_ptr<Optimizer> create(const OptimizerConfig& config,
                                           std::span<const ParamInfo> params,
                                           std::size_t num_params);

  // The names create() accepts, for CLI help.
  static const std::vector<std::string>& known_names();

  // One update: params -= f(grads, state, lr). grads are already averaged over ranks.
  // Both spans hold num_params floats; lr must be finite and >= 0 (std::invalid_argument).
  // Never allocates (beyond what an observer does).
  virtual void step(std::span<float> params, std::span<const float> grads, double lr) = 0;

  // Called by step() with [offset, offset + count) once that range's parameters and state are
  // final for this step, while they are still in cache: a later pass (narrowing to bf16, a
  // snapshot) can work on each block instead of streaming the whole buffer again. With an
  // observer, step() runs each segment in blocks of at most kUpdateBlock floats (the same
  // per-element arithmetic, so the same bits as without one) and reports each block in
  // increasing offset order; every float a ParamInfo covers is reported exactly once per
  // step, padding never. An empty observer (the default) restores the unblocked loops.
  using UpdateObserver = std::function<void(std::size_t offset, std::size_t count)>;
  void set_update_observer(UpdateObserver observer) { observer_ = std::move(observer); }

  // Floats per observed block, a multiple of 16 (one 64-byte line). 16 Ki floats is 64 KiB of
  // parameters: with the gradient and one or two state buffers the block's working set stays
  // well inside a 1 MiB L2 when the observer reads it back.
  static constexpr std::size_t kUpdateBlock = std::size_t{1} << 14;

  // The whole optimizer state as one flat float span (possibly empty), and the number of
  // steps taken (Adam's bias correction; SGD's first step copies the gradient into the
  // momentum buffer): what a checkpoint stores. Restore both: copy the saved floats into
  // state() and call set_steps_taken.
  //   sgd, lars: momentum buffer, num_params floats (empty when momentum == 0)
  //   adam, adamw: first moment m then second moment v, 2 * num_params floats
  virtual std::span<float> state() noexcept = 0;
  virtual std::uint64_t steps_taken() const noexcept = 0;
  virtual void set_steps_taken(std::uint64_t steps) noexcept = 0;

  virtual std::string name() const = 0;

 protected:
  // Runs update(offset, count) over [offset, offset + count): once, without an observer;
  // else block by block, reporting each block to the observer right after its update.
  template <typename Update>
  void for_each_block(std::size_t offset, std::size_t count, Update&& update) {
    if (!observer_) {
      update(offset, count);
      return;
    }
    for (std::size_t done = 0; done < count; done += kUpdateBlock) {
      const std::size_t n = count - done < kUpdateBlock ? count - done : kUpdateBlock;
      update(offset + done, n);
      observer_(offset + done, n);
    }
  }

 private:
  UpdateObserver observer_;
};

}  // namespace ringtrain
