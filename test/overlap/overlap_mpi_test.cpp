// Overlapped (communication thread) and non-overlapped training end bit-identical after 50
// steps at np 1..4: every all-reduce algorithm, hier with two ranks per "node" (forced, as
// the test machine is one node), the 16-bit transports, --accumulate and bf16 compute
// (--precision bf16, also for alexnet's dropout and vgg11's batch norm). Same buckets, same
// summation order: only when they are reduced differs. Every rank also ends with rank 0's
// parameters, bit for bit.
// The cases are tagged so that CMake can give each group its own ctest entry (each well
// under 30 s); run one group with `test_overlap_mpi "[hier]"`.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "collectives/MpiCommunicator.h"
#include "nn/Precision.h"
#include "common/Json.h"
#include "support/mpi_test_util.h"
#include "support/trainer_test_util.h"
#include "train/Trainer.h"

using namespace ringtrain;
using ringtrain::test::all_ranks;
using ringtrain::test::copy_params;
using ringtrain::test::small_config;

namespace {

struct Variant {
  std::string algo = "ring";
  std::string compress = "none";
  int accumulate = 1;
  int node_group = 0;  // MpiCommunicatorOptions::node_group_size (0: the real node split)
  std::string precision = "fp32";
  // Another zoo model than lenet5: 3x32x32 synthetic data, batch 2, 3 steps, 1 MiB buckets.
  std::string model = "lenet5";
};

std::string describe(const Variant& v) {
  return fmt::format("{} {} compress {} accumulate {} node group {} precision {}", v.model, v.algo, v.compress,
                     v.accumulate, v.node_group, v.precision);
}

// config.json's overlap_active of a finished run (what the trainer actually did).
bool overlap_was_active(const TrainConfig& c) {
  std::ifstream in(std::filesystem::path(c.run_dir) / "config.json");
  std::stringstream text;
  text << in.rdbuf();
  const Json j = Json::parse(text.str());
  return j.at("overlap_active").as_bool();
}

// Trains `v` with overlap off and on, on a communicator of its own (so hier sees the forced
// grouping), and checks the two parameter vectors are equal bit for bit on every rank.
void check_bit_identical(const Variant& v) {
  MpiCommunicatorOptions options;
  options.node_group_size = v.node_group;
  MpiCommunicator world(MPI_COMM_WORLD, options);
  const int n = world.size();
  std::vector<float> params[2];
  bool active[2] = {false, false};
  for (const bool overlap : {false, true}) {
    TrainConfig c = small_config(fmt::format("overlap_{}_{}_{}_k{}_g{}_{}_{}", v.model, v.algo, v.compress,
                                             v.accumulate, v.node_group, v.precision, overlap ? "on" : "off"),
                                 8);
    c.precision = v.precision;
    if (v.model != "lenet5") {
      c.model = v.model;
      c.data.synthetic_shape = {3, 32, 32};
      c.data.synthetic_train = 64;
      c.data.synthetic_test = 8;
      c.batch_size = 2;
      c.max_steps = 3;
    }
    c.allreduce = v.algo;
    c.compress = v.compress;
    c.accumulate = v.accumulate;
    c.overlap = overlap ? "on" : "off";
    c.tensorboard = false;  // not what is tested; keeps each run short
    // lenet5's 61706 parameters in 24 buckets, so backward hands most of them over while
    // it still runs (the default 4 MiB would be a single bucket); alexnet's and vgg11's
    // 7.7 M and 9.2 M in 1 MiB buckets (30 and 36).
    c.bucket_mb = v.model == "lenet5" ? 0.01 : 1.0;
    Trainer t(c, world);
    t.run();
    params[overlap ? 1 : 0] = copy_params(t);
    if (world.rank() == 0) active[overlap ? 1 : 0] = overlap_was_active(c);
  }
  const auto& a = params[0];
  const auto& b = params[1];
  bool ok = !a.empty() && a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  // The overlapped run really used the communication thread (one rank has nothing to send).
  if (world.rank() == 0) ok = ok && !active[0] && active[1] == (n > 1);
  // Data parallelism keeps one model: every rank holds rank 0's parameters.
  std::vector<float> root = a;
  world.broadcast(root, 0);
  ok = ok && root.size() == a.size() && std::memcmp(root.data(), a.data(), a.size() * sizeof(float)) == 0;
  INFO(describe(v) << ", overlap active off/on " << active[0] << "/" << active[1]);
  CHECK(all_ranks(ok));
}

}  // namespace

TEST_CASE("Overlap on and off bit-identical: ring, with and without --accumulate", "[ring]") {
  check_bit_identical({.algo = "ring"});
  // --accumulate changes what overlaps (only the last micro-batch), not how buckets are
  // reduced: one algorithm is enough for it.
  check_bit_identical({.algo = "ring", .accumulate = 2});
}

TEST_CASE("Overlap on and off bit-identical: mpi and ps (fp32 and bf16)", "[mpi_ps]") {
  check_bit_identical({.algo = "mpi"});
  check_bit_identical({.algo = "ps"});
  check_bit_identical({.algo = "ps", .compress = "bf16"});
}

TEST_CASE("Overlap on and off bit-identical: rd, rab and auto", "[rd_auto]") {
  check_bit_identical({.algo = "rd"});
  check_bit_identical({.algo = "rab"});
  check_bit_identical({.algo = "rab", .compress = "bf16"});
  check_bit_identical({.algo = "auto"});
}

TEST_CASE("Overlap on and off bit-identical: hier with two ranks per node", "[hier]") {
  // The grouping must really give hier multi-rank nodes, or this would test the flat ring.
  MpiCommunicatorOptions options;
  options.node_group_size = 2;
  {
    MpiCommunicator probe(MPI_COMM_WORLD, options);
    const int n = probe.size();
    const bool grouped = probe.layout().nodes == (n + 1) / 2 &&
                         probe.layout().nodes_with_several_ranks == n / 2 &&
                         (n < 2 || probe.resolve(AllreduceAlgo::kHierarchical, 1 << 20, Compression::kNone) ==
                                       AllreduceAlgo::kHierarchical);
    INFO("nodes " << probe.layout().nodes << ", with several ranks " << probe.layout().nodes_with_several_ranks);
    REQUIRE(all_ranks(grouped));
  }
  check_bit_identical({.algo = "hier", .node_group = 2});
  check_bit_identical({.algo = "hier", .compress = "fp16", .node_group = 2});
}

TEST_CASE("Overlap on and off bit-identical: ring with 16-bit gradient transport", "[compress]") {
  check_bit_identical({.algo = "ring", .compress = "bf16"});
  check_bit_identical({.algo = "ring", .compress = "fp16"});
}

TEST_CASE("Overlap on and off bit-identical: bf16 compute (--precision bf16)", "[precision]") {
  if (const std::string why = precision_refusal_here(Precision::kBf16); !why.empty()) {
    WARN("skipped: " << why);
    return;
  }
  check_bit_identical({.algo = "ring", .precision = "bf16"});
  check_bit_identical({.algo = "rab", .compress = "bf16", .accumulate = 2, .precision = "bf16"});
  // Dropout (alexnet) and batch norm (vgg11) in bf16.
  check_bit_identical({.algo = "ring", .precision = "bf16", .model = "alexnet"});
  check_bit_identical({.algo = "ring", .precision = "bf16", .model = "vgg11"});
}
