// Asynchronous parameter-server training under mpirun (np 2..4):
// - K = 0 applies the updates of --mode sync --allreduce ps over the W workers;
// - one worker, async, equals the single-process sequence (also over 3 uneven shards);
// - the staleness of every applied gradient stays within K;
// - a K = 0 run resumed from a mid-run checkpoint ends where the uninterrupted run ends.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "collectives/MpiCommunicator.h"
#include "collectives/MpiEnvironment.h"
#include "nn/Model.h"
#include "support/mpi_test_util.h"
#include "async/AsyncTrainer.h"
#include "train/Trainer.h"
#include "support/trainer_test_util.h"

using namespace ringtrain;
using ringtrain::test::all_ranks;

namespace {

// The trainer tests' small lenet5 run (trainer_test_util.h), made asynchronous: batch 8,
// 30 steps, cosine over 10 epochs. shared: every rank calls this (rank 0 clears the
// directory, then a barrier); else rank 0 alone.
TrainConfig small_config(const std::string& tag, int servers, int max_staleness, bool shared = true) {
  TrainConfig c = test::small_config(tag, 8);
  c.max_steps = 30;
  c.schedule.name = "cosine";
  c.schedule.total_epochs = 10;
  c.mode = "async";
  c.servers = servers;
  c.max_staleness = max_staleness;
  c.run_dir = (test::job_dir() / fmt::format("async_{}", tag)).string();
  // One rank clears a previous run's directory, then all go on (no rank races the removal).
  if (test::world_rank() == 0) std::filesystem::remove_all(c.run_dir);
  if (shared) MPI_Barrier(MPI_COMM_WORLD);
  return c;
}

using test::copy_params;

double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0.0;
  double norm = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

bool identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("K = 0 applies the updates of sync ps over the workers") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const int n = world.size();
  if (n < 3) return;  // needs two workers or more
  // np 3: one server and two workers; np 4: two servers over uneven... shards of lenet5.
  const int servers = n == 4 ? 2 : 1;
  TrainConfig a = small_config("k0", servers, 0);
  Trainer async_run(a, world);
  const TrainResult ra = async_run.run();
  const std::vector<float> p_async = copy_params(async_run);

  // The reference: --mode sync --allreduce ps over exactly the worker ranks.
  MPI_Comm sub = MPI_COMM_NULL;
  const bool is_worker = world.rank() >= servers;
  MPI_Comm_split(MPI_COMM_WORLD, is_worker ? 0 : MPI_UNDEFINED, world.rank(), &sub);
  double err = 0.0;
  bool same = true;
  if (is_worker) {
    {
      MpiCommunicator workers(sub);
      TrainConfig s = small_config("k0_sync", 1, -1, false);
      s.mode = "sync";
      s.allreduce = "ps";
      Trainer sync_run(s, workers);
      const TrainResult rs = sync_run.run();
      const std::vector<float> p_sync = copy_params(sync_run);
      err = relative_error(p_async, p_sync);
      same = identical(p_async, p_sync) && rs.steps == ra.steps;
    }
    MPI_Comm_free(&sub);
  }
  INFO("relative error " << err << ", bit-identical " << same << ", steps " << ra.steps);
  CHECK(ra.steps == 30);
  // Same order of summation and scaling as ParameterServerAllreduce: bit-identical.
  CHECK(all_ranks(same));
}

TEST_CASE("One worker, async, equals the single-process sequence") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const int n = world.size();
  if (n != 2 && n != 4) return;
  // np 2: one server; np 4: three servers whose shards differ in size (61706 = 3 x 20568 + 2).
  const int servers = n - 1;
  for (const int k : {-1, 0}) {
    TrainConfig a = small_config(fmt::format("one_worker_k{}", k), servers, k);
    Trainer async_run(a, world);
    async_run.run();
    const std::vector<float> p_async = copy_params(async_run);
    bool same = false;
    double err = INFINITY;
    if (world.rank() == 0) {
      auto self = make_self_communicator();
      TrainConfig s = small_config(fmt::format("one_worker_serial_k{}", k), 1, -1, false);
      s.mode = "sync";
      Trainer single(s, *self);
      single.run();
      err = relative_error(p_async, copy_params(single));
      same = identical(p_async, copy_params(single));
    }
    INFO("K " << k << ": relative error " << err);
    CHECK(all_ranks(world.rank() != 0 || same));
  }
}

TEST_CASE("Staleness never exceeds K") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const int n = world.size();
  if (n < 3) return;
  for (const int k : {1, 2}) {
    TrainConfig c = small_config(fmt::format("staleness_k{}", k), 1, k);
    c.max_steps = 60;
    // A straggler: the last worker sleeps 10 ms per step, so the others would run ahead
    // without the bound (unbounded, the fast worker's staleness grows with the run).
    c.straggler_ms = 10.0;
    AsyncTrainer t(c, world);
    const TrainResult r = t.run();
    const auto& hist = t.staleness_histogram();
    const std::int64_t total = std::accumulate(hist.begin(), hist.end(), std::int64_t{0});
    std::int64_t beyond = 0;
    for (std::size_t i = static_cast<std::size_t>(k) + 1; i < hist.size(); ++i) beyond += hist[i];
    INFO("K " << k << ": " << total << " gradients, " << beyond << " staler than K");
    // Every applied gradient is in the histogram (one update each when K > 0), none past K.
    CHECK(all_ranks(total == r.steps && r.steps == 60 && beyond == 0));
  }
}

TEST_CASE("K = 0 resumed from a mid-run checkpoint ends where the uninterrupted run ends") {
  MpiCommunicator world(MPI_COMM_WORLD);
  TrainConfig c = small_config("resume_full", 1, 0);
  c.checkpoint_every_steps = 10;
  c.max_steps = 25;
  Trainer full(c, world);
  full.run();
  const std::vector<float> p_full = copy_params(full);

  TrainConfig r = small_config("resume_part", 1, 0);
  r.max_steps = 25;
  r.resume = (std::filesystem::path(c.run_dir) / "checkpoints" / "ckpt-000000010.rtck").string();
  Trainer resumed(r, world);
  const TrainResult rr = resumed.run();
  const bool same = identical(p_full, copy_params(resumed));
  CHECK(rr.steps == 25);
  CHECK(all_ranks(same));
}
