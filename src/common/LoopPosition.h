// Where a training run stands: a value the loop advances after each completed step and
// hands to the checkpoint writer as it is, so a checkpoint always names the next step to run.
#pragma once

#include <cstdint>

namespace ringtrain {

struct LoopPosition {
  int epoch = 0;                   // the current epoch, 0-based
  std::int64_t step_in_epoch = 0;  // steps completed in it (= the 0-based index of the next)
  std::int64_t global_step = 0;    // steps completed in the run

  LoopPosition after_step() const { return {epoch, step_in_epoch + 1, global_step + 1}; }
  LoopPosition next_epoch() const { return {epoch + 1, 0, global_step}; }
};

// The running sums of the current epoch (restored with the position on resume, so a
// resumed epoch reports the same train loss as an uninterrupted one).
struct EpochTotals {
  double loss_sum = 0.0;  // summed over ranks and samples
  double correct = 0.0;
  double count = 0.0;
  double seconds = 0.0;   // training seconds spent in this epoch so far
};

}  // namespace ringtrain
