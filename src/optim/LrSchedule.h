// Learning-rate schedules as pure functions of the (fractional) epoch, so resuming from a
// checkpoint needs only the position.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringtrain {

struct LrScheduleConfig {
  std::string name = "constant";  // constant | step | multistep | cosine
  double base_lr = 0.01;
  double gamma = 0.1;             // step, multistep: factor at each boundary
  double step_epochs = 30;        // step: period in epochs
  std::vector<double> milestones; // multistep: epochs where lr *= gamma (increasing)
  double total_epochs = 1;        // cosine: the annealing horizon, counted from epoch 0
  double min_lr = 0.0;            // cosine: the floor
  double warmup_epochs = 0;       // linear warmup, see below (0 = none)
  // Warmup starts at warmup_start_factor * target and rises linearly to the target, the
  // schedule's lr at warmup_epochs. Goyal et al. 2017 start from the unscaled lr, i.e.
  // factor = base_batch / global_batch = 1 / k. The default 0 starts from 0.
  double warmup_start_factor = 0.0;
};

// lr(e), the schedule s(e) of the named shape, then warmup over W = warmup_epochs:
//   constant:  s(e) = base_lr
//   step:      s(e) = base_lr * gamma^floor(e / step_epochs)
//   multistep: s(e) = base_lr * gamma^(number of milestones <= e)
//   cosine:    s(e) = min_lr + (base_lr - min_lr) * (1 + cos(pi * e / total_epochs)) / 2,
//              and min_lr from total_epochs on (Loshchilov & Hutter 2017, no restarts)
//   e < W:     lr(e) = s(W) * (f + (1 - f) * e / W), f = warmup_start_factor
//              (Goyal et al. 2017, gradual warmup); e >= W: lr(e) = s(e)
// Boundaries count as reached 1e-9 epochs early, so e = epoch + step / steps_per_epoch
// rounding just below a boundary does not delay it by a step.
class LrSchedule {
 public:
  // Throws std::invalid_argument for an unknown name or bad values.
  explicit LrSchedule(LrScheduleConfig config);
  // lr at fractional epoch e = epoch + step / steps_per_epoch (e >= 0, finite; else
  // std::invalid_argument).
  double lr(double epoch) const;
  const LrScheduleConfig& config() const noexcept { return config_; }

  // The names the constructor accepts, for CLI help.
  static const std::vector<std::string>& known_names();

 private:
  double schedule(double epoch) const;  // s(e), without warmup

  LrScheduleConfig config_;
};

// Goyal et al. 2017, "Accurate, Large Minibatch SGD": lr = base_lr * global_batch / base_batch.
// Throws std::invalid_argument unless both batches are > 0 and base_lr >= 0.
double scale_lr_linear(double base_lr, double global_batch, double base_batch);

// The fractional epoch of step `step` (0-based) in epoch `epoch` (0-based).
double fractional_epoch(std::int64_t epoch, std::int64_t step, std::int64_t steps_per_epoch);

// Parses a comma-separated list of epochs such as "10,20" or "30, 60, 80" (spaces
// allowed, empty text gives an empty list). Throws std::invalid_argument naming the
// offending item for an empty item, a non-number, a negative or non-finite value, or a
// value not greater than the one before.
std::vector<double> parse_milestones(std::string_view text);

}  // namespace ringtrain
