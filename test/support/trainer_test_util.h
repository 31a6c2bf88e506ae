// The small training run the trainer's MPI tests share (lenet5 on synthetic 1x28x28 data,
// 50 steps, constant rate) and reading its parameters back.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "support/mpi_test_util.h"
#include "nn/Model.h"
#include "train/Trainer.h"

namespace ringtrain::test {

// Its run directory is a temporary one named after `tag` and the world size, so that the
// test entries of different rank counts can run side by side.
inline TrainConfig small_config(const std::string& tag, int batch) {
  TrainConfig c;
  c.model = "lenet5";
  c.data.name = "synthetic";
  c.data.synthetic_shape = {1, 28, 28};
  c.data.synthetic_classes = 10;
  c.data.synthetic_train = 1024;
  c.data.synthetic_test = 203;  // not divisible by any rank count: eval shards are uneven
  c.batch_size = batch;
  c.epochs = 10;
  c.max_steps = 50;
  c.eval_every = 0;
  // Constant, not TrainConfig's cosine: the 1e-5 tolerances of trainer_mpi_test were set for
  // it (with cosine over 10 epochs, ps at np 4 ends 1.1e-4 apart, the sum order amplified
  // over 50 steps).
  c.schedule.name = "constant";
  c.schedule.base_lr = 0.02;
  c.optimizer.momentum = 0.9;
  c.seed = 7;
  c.quiet = true;
  c.run_dir = (job_dir() / fmt::format("trainer_{}", tag)).string();
  return c;
}

inline std::vector<float> copy_params(const Trainer& t) {
  const auto p = t.model().params();
  return {p.begin(), p.end()};
}

}  // namespace ringtrain::test
