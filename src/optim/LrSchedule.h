// Learning-rate schedules as pure functions of the (fractional) epoch, so resuming from a
// checkpoint needs only the position.
#pragma once

#include <string>
#include <vector>

namespace ringtrain {

struct LrScheduleConfig {
  std::string name = "constant";  // constant | step | multistep | cosine
  double base_lr = 0.01;
  double gamma = 0.1;             // step, multistep: factor at each boundary
  double step_epochs = 30;        // step: period in epochs
  std::vector<double> milestones; // multistep: epochs where lr *= gamma
  double total_epochs = 1;        // cosine: the annealing horizon
  double min_lr = 0.0;            // cosine: the floor
  double warmup_epochs = 0;       // linear warmup from base_lr / warmup_start_div
};

class LrSchedule {
 public:
  // Throws std::invalid_argument for an unknown name or bad values.
  explicit LrSchedule(LrScheduleConfig config);
  // lr at fractional epoch e = epoch + step / steps_per_epoch.
  double lr(double epoch) const;
  const LrScheduleConfig& config() const noexcept { return config_; }

 private:
  LrScheduleConfig config_;
};

// Goyal et al. 2017, "Accurate, Large Minibatch SGD": lr = base_lr * global_batch / base_batch.
double scale_lr_linear(double base_lr, double global_batch, double base_batch);

}  // namespace ringtrain
