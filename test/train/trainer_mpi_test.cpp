// Data-parallel correctness of the trainer under mpirun (np 1..4):
// - N ranks x batch B end with the parameters of 1 rank x batch N*B (every algorithm);
// - two runs with the same seed end bit-identical;
// - evaluation over N ranks equals the single-process value on the same parameters;
// - --straggler-ms delays the last rank without changing the result.
// (Overlapped against non-overlapped training: overlap_mpi_test.cpp.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "collectives/AllreduceCostModel.h"
#include "collectives/MpiCommunicator.h"
#include "collectives/MpiEnvironment.h"
#include "common/Json.h"
#include "support/mpi_test_util.h"
#include "support/trainer_test_util.h"
#include "nn/Model.h"
#include "run/Evaluate.h"
#include "train/Trainer.h"

using namespace ringtrain;
using ringtrain::test::all_ranks;
using ringtrain::test::copy_params;
using ringtrain::test::small_config;

namespace {

double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0;
  double norm = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

}  // namespace

TEST_CASE("N ranks x batch B equal 1 rank x batch N*B after 50 steps") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const int n = world.size();
  constexpr int kBatch = 8;
  for (const char* algo : {"ring", "mpi", "ps", "rd", "rab"}) {
    TrainConfig distributed = small_config(fmt::format("equiv_{}", algo), kBatch);
    distributed.allreduce = algo;
    Trainer parallel(distributed, world);
    parallel.run();
    const std::vector<float> p_parallel = copy_params(parallel);

    double err = 0.0;
    if (world.rank() == 0) {
      auto self = make_self_communicator();
      TrainConfig serial = small_config(fmt::format("equiv_{}_serial", algo), kBatch * n);
      Trainer single(serial, *self);
      single.run();
      err = relative_error(p_parallel, copy_params(single));
    }
    const bool ok = all_ranks(err <= 1e-5);
    INFO("algorithm " << algo << ", relative error " << err);
    CHECK(ok);
  }
}

TEST_CASE("Two runs with the same seed end bit-identical") {
  MpiCommunicator world(MPI_COMM_WORLD);
  TrainConfig c = small_config("determinism", 8);
  c.max_steps = 30;
  Trainer first(c, world);
  first.run();
  Trainer second(c, world);
  second.run();
  const auto a = copy_params(first);
  const auto b = copy_params(second);
  const bool same = a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  CHECK(all_ranks(same));
}

TEST_CASE("Evaluation over N ranks equals the single-process value") {
  MpiCommunicator world(MPI_COMM_WORLD);
  TrainConfig c = small_config("eval", 8);
  c.max_steps = 20;
  c.checkpoint_every_steps = 20;
  Trainer t(c, world);
  const TrainResult r = t.run();
  const auto ckpt = std::filesystem::path(c.run_dir) / "checkpoints" / "ckpt-000000020.rtck";

  // The trainer's own final evaluation used batch max(8, 256) per rank; a different batch
  // here also checks that the shard boundaries do not change the sums.
  const EvalResult across = evaluate_checkpoint(world, ckpt, c.data, 16);
  bool ok = across.samples == 203 && across.accuracy == r.final_test_accuracy &&
            std::abs(across.loss - r.final_test_loss) <= 1e-6 * std::abs(across.loss);
  INFO("trainer: accuracy " << r.final_test_accuracy << " loss " << r.final_test_loss << "; checkpoint over ranks: "
                            << across.accuracy << " " << across.loss << " (" << across.samples << " samples)");
  if (world.rank() == 0) {
    auto self = make_self_communicator();
    const EvalResult alone = evaluate_checkpoint(*self, ckpt, c.data, 64);
    ok = ok && alone.samples == 203 && alone.accuracy == across.accuracy &&
         std::abs(alone.loss - across.loss) <= 1e-6 * std::abs(alone.loss);
    INFO("accuracy " << across.accuracy << " vs " << alone.accuracy << ", loss " << across.loss << " vs "
                     << alone.loss);
    CHECK(ok);
  }
  CHECK(all_ranks(ok));
}

TEST_CASE("--accumulate K x batch B equals batch K*B") {
  MpiCommunicator world(MPI_COMM_WORLD);
  TrainConfig accumulated = small_config("accumulate_k", 4);
  accumulated.accumulate = 2;
  accumulated.max_steps = 30;
  Trainer a(accumulated, world);
  a.run();
  TrainConfig whole = small_config("accumulate_whole", 8);
  whole.max_steps = 30;
  Trainer b(whole, world);
  b.run();
  const double err = relative_error(copy_params(a), copy_params(b));
  INFO("relative error " << err);
  CHECK(all_ranks(err <= 1e-5));
}

TEST_CASE("--straggler-ms slows the last rank in sync mode and changes no result") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const int n = world.size();
  constexpr int kSteps = 10;
  constexpr double kPauseMs = 5.0;
  std::vector<float> params[2];
  for (const bool slowed : {false, true}) {
    TrainConfig c = small_config(fmt::format("straggler_{}", slowed ? "on" : "off"), 8);
    c.max_steps = kSteps;
    c.straggler_ms = slowed ? kPauseMs : 0.0;
    Trainer t(c, world);
    t.run();
    params[slowed ? 1 : 0] = copy_params(t);
    if (slowed && world.rank() == 0) {
      // summary.json: the pause is the last rank's backward time (sleep_for sleeps at least as
      // long as asked, so this bound holds under any load), and no other rank's.
      std::ifstream in(std::filesystem::path(c.run_dir) / "summary.json");
      std::stringstream text;
      text << in.rdbuf();
      const Json j = Json::parse(text.str());
      const auto& ranks = j.at("ranks").as_array();
      const double last = ranks.at(static_cast<std::size_t>(n - 1)).at("phases_s").at("backward").as_double();
      INFO("last rank's backward " << last << " s over " << kSteps << " steps");
      CHECK(last >= kSteps * kPauseMs / 1000.0);
    }
  }
  const auto& a = params[0];
  const auto& b = params[1];
  CHECK(all_ranks(a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0));
}

TEST_CASE("auto with one rank per node: summary.json names the cost model's choice per bucket size") {
  // node_group_size 1: every rank its own "node", so auto chooses by the cost model.
  MpiCommunicatorOptions options;
  options.node_group_size = 1;
  MpiCommunicator world(MPI_COMM_WORLD, options);
  const int n = world.size();
  const std::string tuning = (test::job_dir() / "auto.tuning").string();
  if (world.rank() == 0) std::ofstream(tuning) << "alpha_s = 1e-3\nchoice_margin = 0\n";
  world.barrier();
  AllreduceCostModel model;
  model.alpha_s = 1e-3;
  model.choice_margin = 0;
  for (const bool with_file : {false, true}) {
    TrainConfig c = small_config(with_file ? "auto_tuned" : "auto_builtin", 8);
    c.max_steps = 2;
    c.allreduce = "auto";
    c.bucket_mb = 0.05;  // lenet5's 61706 floats: full buckets and a smaller last one
    if (with_file) c.tuning = tuning;
    Trainer t(c, world);
    t.run();
    if (world.rank() != 0) continue;
    std::ifstream in(std::filesystem::path(c.run_dir) / "summary.json");
    std::stringstream text;
    text << in.rdbuf();
    const Json j = Json::parse(text.str());
    CHECK(j.at("tuning").as_string() == (with_file ? tuning : "built-in"));
    const auto& plans = j.at("allreduce_plan").as_array();
    if (n == 1) {
      CHECK(plans.empty());
      continue;
    }
    REQUIRE(plans.size() == 2);
    for (const Json& p : plans) {
      const auto bytes = static_cast<std::size_t>(p.at("bytes").as_int());
      const AllreducePlan expected =
          choose_by_cost_model(bytes, n, Compression::kNone, 2048, with_file ? model : AllreduceCostModel{});
      INFO("bytes " << bytes << " " << p.dump());
      CHECK(p.at("basis").as_string() == "cost model");
      CHECK(p.at("algo").as_string() == allreduce_algo_name(expected.algo));
      CHECK(p.at("lanes").as_int() == (expected.algo == AllreduceAlgo::kRabenseifner ? expected.rab_lanes : 1));
      for (const auto& [algo, seconds] : expected.predicted_s)
        CHECK(p.at("predicted_us").at(std::string(allreduce_algo_name(algo))).as_double() == Approx(1e6 * seconds));
    }
  }
}
