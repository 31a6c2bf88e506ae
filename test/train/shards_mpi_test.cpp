// --logical-shards S = 12: the parameters (and batch-norm buffers) after N steps are
// bit-identical at p = 1, 2, 3 and 4 ranks, for lenet5, alexnet (dropout), vgg11 (batch
// norm) and resnet20 (a layer graph with batch norm), with --overlap on and off; a run resumed mid-epoch from a checkpoint written at
// another p ends with the same bits; a p that does not divide S is refused on every rank.
// One np-4 job runs each p on a sub-communicator of ranks 0..p-1 (the others wait), so the
// runs can be compared in memory. OMP_NUM_THREADS=1 and --threads 1 everywhere: oneDNN's
// kernels may cut their reductions by thread count.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "collectives/MpiCommunicator.h"
#include "support/mpi_test_util.h"
#include "support/trainer_test_util.h"
#include "train/Trainer.h"

using namespace ringtrain;
using ringtrain::test::all_ranks;
using ringtrain::test::job_dir;
using ringtrain::test::world_rank;
using ringtrain::test::world_size;

namespace {

constexpr int kShards = 12;

// lenet5: 12 shards x batch 2; alexnet and vgg11 (3x32x32, ~100x the work per image): 12 x 1.
// Either way 5 steps per epoch, so the longer runs cross an epoch boundary.
TrainConfig shard_config(const std::string& model, const std::string& tag, std::int64_t steps) {
  const bool small = model == "lenet5" || model == "resnet20";
  TrainConfig c = ringtrain::test::small_config(tag, small ? 2 : 1);
  c.model = model;
  if (!small) c.data.synthetic_shape = {3, 32, 32};
  if (model == "resnet20") c.data.synthetic_shape = {3, 8, 8};  // a layer graph with batch norm, kept small
  c.data.synthetic_train = small ? 120 : 60;
  c.data.synthetic_test = 30;
  c.logical_shards = kShards;
  c.max_steps = steps;
  c.threads = 1;
  c.tensorboard = false;
  c.schedule.base_lr = 0.01;
  return c;
}

// Trains c on ranks 0..p-1 (run dir suffixed with p); every world rank gets rank 0's
// parameters followed by its buffers, or an empty vector if the run failed (error says why).
std::vector<float> train_at(int p, TrainConfig c, std::string* error = nullptr) {
  c.run_dir += fmt::format("_p{}", p);
  MPI_Comm sub = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank() < p ? 0 : MPI_UNDEFINED, world_rank(), &sub);
  std::vector<float> state;
  std::string message;
  if (sub != MPI_COMM_NULL) {
    try {
      MpiCommunicator comm(sub);
      Trainer t(c, comm);
      t.run();
      const auto params = t.model().params();
      const auto buffers = t.model().buffers();
      state.assign(params.begin(), params.end());
      state.insert(state.end(), buffers.begin(), buffers.end());
    } catch (const std::exception& e) {
      message = e.what();
      state.clear();
    }
    MPI_Comm_free(&sub);
  }
  unsigned long long n = state.size();
  MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  state.resize(n);
  if (n > 0) MPI_Bcast(state.data(), static_cast<int>(n), MPI_FLOAT, 0, MPI_COMM_WORLD);
  if (error != nullptr) *error = message;
  return state;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return !a.empty() && a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::size_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return i;
  }
  return std::min(a.size(), b.size());
}

// Every p in 1..min(4, world) against p = 1, overlap on and off.
void check_rank_counts(const std::string& model, std::int64_t steps) {
  const int max_p = std::min(4, world_size());
  std::vector<float> reference;
  for (const char* overlap : {"off", "on"}) {
    for (int p = 1; p <= max_p; ++p) {
      TrainConfig c = shard_config(model, fmt::format("shards_{}_{}", model, overlap), steps);
      c.overlap = overlap;
      std::string error;
      const std::vector<float> state = train_at(p, c, &error);
      if (reference.empty()) reference = state;
      const bool same = same_bits(state, reference);
      INFO(model << " at p = " << p << ", --overlap " << overlap << ": " << state.size() << " floats, "
                 << (error.empty() ? "" : "error: " + error) << " first difference at "
                 << first_difference(state, reference));
      CHECK(all_ranks(same));
    }
  }
}

}  // namespace

TEST_CASE("lenet5: bit-identical parameters at p = 1..4 with 12 logical shards", "[lenet5]") {
  check_rank_counts("lenet5", 8);
}

TEST_CASE("alexnet (dropout): bit-identical parameters at p = 1..4 with 12 logical shards", "[alexnet]") {
  check_rank_counts("alexnet", 2);
}

TEST_CASE("vgg11 (batch norm): bit-identical parameters and buffers at p = 1..4 with 12 logical shards", "[vgg11]") {
  check_rank_counts("vgg11", 2);
}

TEST_CASE("resnet20 (a graph, batch norm): bit-identical parameters and buffers at p = 1..4, 12 logical shards",
          "[resnet20]") {
  check_rank_counts("resnet20", 3);
}

TEST_CASE("resnet20 resumed mid-epoch from a checkpoint ends with the bits of the run that never stopped",
          "[resnet20]") {
  const int p = std::min(2, world_size());
  const std::vector<float> whole = train_at(p, shard_config("resnet20", "resnet20_whole", 7));
  TrainConfig first = shard_config("resnet20", "resnet20_first", 3);
  first.checkpoint_every_steps = 3;
  const std::vector<float> stopped = train_at(p, first);
  const auto ckpt =
      std::filesystem::path(first.run_dir + fmt::format("_p{}", p)) / "checkpoints" / "ckpt-000000003.rtck";
  REQUIRE(all_ranks(!stopped.empty() && std::filesystem::exists(ckpt)));
  TrainConfig rest = shard_config("resnet20", "resnet20_rest", 7);
  rest.resume = ckpt.string();
  std::string error;
  const std::vector<float> resumed = train_at(p, rest, &error);
  INFO("resumed at p = " << p << (error.empty() ? "" : ": " + error) << "; first difference at "
                         << first_difference(resumed, whole));
  CHECK(all_ranks(same_bits(resumed, whole)));
  CHECK(all_ranks(!same_bits(stopped, whole)));  // the resumed part did move the parameters
}

TEST_CASE("Without --logical-shards the rank count changes the bits (what the test above can catch)", "[lenet5]") {
  if (world_size() < 2) return;
  TrainConfig c = shard_config("lenet5", "shards_off", 8);
  c.logical_shards = 0;
  c.global_batch_size = 24;
  const std::vector<float> one = train_at(1, c);
  const std::vector<float> two = train_at(2, c);
  CHECK(all_ranks(!one.empty() && one.size() == two.size() && !same_bits(one, two)));
}

// lenet5 (5 steps per epoch, as vgg11's): the position and the sampler are what resuming
// tests; batch-norm buffers across p are vgg11's case above. vgg11 here cost 100-200 s.
TEST_CASE("A checkpoint written at one p resumes mid-epoch at another with the same final bits", "[resume]") {
  const int max_p = std::min(4, world_size());
  const std::vector<float> whole = train_at(1, shard_config("lenet5", "shards_resume_whole", 7));
  // Written at the largest p after 3 of the epoch's 5 steps, resumed at every other p
  // (crossing into the second epoch).
  TrainConfig first = shard_config("lenet5", "shards_resume_first", 3);
  first.checkpoint_every_steps = 3;
  const std::vector<float> stopped = train_at(max_p, first);
  const auto ckpt = std::filesystem::path(first.run_dir + fmt::format("_p{}", max_p)) / "checkpoints" /
                    "ckpt-000000003.rtck";
  REQUIRE(all_ranks(!stopped.empty() && std::filesystem::exists(ckpt)));
  for (int p = 1; p <= max_p; ++p) {
    TrainConfig rest = shard_config("lenet5", "shards_resume_rest", 7);
    rest.resume = ckpt.string();
    std::string error;
    const std::vector<float> resumed = train_at(p, rest, &error);
    INFO("written at p = " << max_p << ", resumed at p = " << p << (error.empty() ? "" : ": " + error)
                           << "; first difference at " << first_difference(resumed, whole));
    CHECK(all_ranks(same_bits(resumed, whole)));
  }
}

TEST_CASE("A rank count that does not divide --logical-shards is refused on every rank", "[refuse]") {
  if (world_size() < 4) return;
  TrainConfig c = shard_config("lenet5", "shards_refused", 2);
  c.logical_shards = 6;  // not divisible by 4
  std::string error;
  MpiCommunicator comm(MPI_COMM_WORLD);
  try {
    Trainer t(c, comm);
    t.run();
  } catch (const std::exception& e) {
    error = e.what();
  }
  INFO("rank " << world_rank() << ": '" << error << "'");
  CHECK(all_ranks(error == "--logical-shards 6 is not divisible by the 4 ranks: run at a rank count that divides it"));
}
