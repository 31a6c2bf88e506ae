// GradientSync against a fake communicator: the overlapped path (communication thread)
// makes the same calls in the same order as the blocking path and leaves the same bytes,
// hands buckets over while "backward" is still running, skips the buckets of a stopped
// step, and reports its failures and timings.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include "collectives/Communicator.h"
#include "collectives/StallRecord.h"
#include "overlap/GradientSync.h"

using namespace ringtrain;

namespace {

struct Call {
  std::string kind;  // "allreduce" | "sum"
  std::size_t offset = 0;
  std::size_t count = 0;
  std::thread::id thread;
  int bucket = -1;  // the stall record's bucket during the call
};

// Acts as rank 0 of `size` ranks whose peers hold values derived from ours: a sum over
// ranks is an exact affine function of the input, so any change of order or range shows.
class FakeCommunicator : public Communicator {
 public:
  FakeCommunicator(int size, const float* base) : size_(size), base_(base) {}

  int rank() const override { return 0; }
  int size() const override { return size_; }
  void allreduce_scaled(std::span<float> data, AllreduceAlgo algo, float scale, Compression) override {
    if (fail_at_call_ >= 0 && static_cast<int>(calls().size()) == fail_at_call_) {
      throw std::runtime_error("fake: link down");
    }
    if (algo != AllreduceAlgo::kRing) throw std::logic_error("fake: unexpected algorithm");
    for (float& v : data) v = (v * static_cast<float>(size_) + 0.25f) * scale;
    log({"allreduce", static_cast<std::size_t>(data.data() - base_), data.size(), std::this_thread::get_id(),
         StallRecord::instance().snapshot().bucket});
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
  }
  void allreduce_sum(std::span<double> data) override {
    for (double& v : data) v *= size_;
    log({"sum", 0, data.size(), std::this_thread::get_id()});
  }
  void allreduce_max(std::span<double>) override {}
  void allreduce_sum(std::span<std::int64_t>) override {}
  void broadcast(std::span<std::byte>, int) override {}
  using Communicator::broadcast;
  std::vector<std::uint64_t> allgather(std::uint64_t v) override { return std::vector<std::uint64_t>(size_, v); }
  std::vector<std::string> allgather(const std::string& v) override { return std::vector<std::string>(size_, v); }
  void barrier() override {}
  std::uint64_t bytes_sent() const override { return 0; }
  std::uint64_t bytes_received() const override { return 0; }
  double wait_seconds() const override { return 0.0; }
  std::string host_name() const override { return "fake"; }
  std::string library_version() const override { return "fake"; }
  bool allows_serialized_threads() const override { return true; }

  std::vector<Call> calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }
  void set_base(const float* base) { base_ = base; }
  int delay_ms_ = 0;
  int fail_at_call_ = -1;

 private:
  void log(Call c) {
    std::lock_guard<std::mutex> lock(mutex_);
    calls_.push_back(std::move(c));
  }
  int size_;
  const float* base_;
  mutable std::mutex mutex_;
  std::vector<Call> calls_;
};

constexpr std::size_t kParams = 1000;
constexpr double kBucketMb = 100 * sizeof(float) / (1024.0 * 1024.0);  // 100 floats per bucket

std::vector<float> gradients() {
  std::vector<float> g(kParams);
  for (std::size_t i = 0; i < kParams; ++i) g[i] = 0.001f * static_cast<float>(i) - 0.37f;
  return g;
}

// One step as TrainStep drives it: the agreement after "forward", then backward's layer
// ranges (sizes that do not line up with the buckets) in buffer order.
StepTotals run_step(GradientSync& sync, std::vector<float>& g, double stop = 0.0, SyncTimes* times = nullptr) {
  StepTotals totals{2.5, 7.0, 16.0, stop};
  sync.begin(g);
  sync.agree(totals);
  const std::size_t layers[] = {130, 70, 250, 1, 399, 150};
  std::size_t offset = 0;
  for (std::size_t count : layers) {
    sync.ready(offset, count);
    offset += count;
  }
  const SyncTimes t = sync.finish();
  if (times != nullptr) *times = t;
  return totals;
}

}  // namespace

TEST_CASE("Overlapped GradientSync makes the blocking path's calls, in order, on another thread, bit-identically") {
  std::vector<float> blocking = gradients();
  std::vector<float> overlapped = gradients();
  FakeCommunicator comm_a(3, blocking.data());
  FakeCommunicator comm_b(3, overlapped.data());
  GradientSync a(comm_a, AllreduceAlgo::kRing, kParams, kBucketMb, /*overlap=*/false);
  GradientSync b(comm_b, AllreduceAlgo::kRing, kParams, kBucketMb, /*overlap=*/true);
  REQUIRE(a.buckets().size() == 10);
  REQUIRE_FALSE(a.overlapped());
  REQUIRE(b.overlapped());

  for (int step = 0; step < 3; ++step) {
    const StepTotals ta = run_step(a, blocking);
    const StepTotals tb = run_step(b, overlapped);
    CHECK(ta.loss_sum == 7.5);
    CHECK(tb.loss_sum == 7.5);
    CHECK(tb.count == 48.0);
  }
  CHECK(std::memcmp(blocking.data(), overlapped.data(), kParams * sizeof(float)) == 0);

  const auto ca = comm_a.calls();
  const auto cb = comm_b.calls();
  REQUIRE(ca.size() == 3 * 11);
  REQUIRE(cb.size() == ca.size());
  for (std::size_t i = 0; i < ca.size(); ++i) {
    INFO("call " << i);
    CHECK(cb[i].kind == ca[i].kind);
    CHECK(cb[i].offset == ca[i].offset);
    CHECK(cb[i].count == ca[i].count);
    CHECK(ca[i].thread == std::this_thread::get_id());
    CHECK(cb[i].thread != std::this_thread::get_id());
  }
  // Each step: the agreement, then the buckets in buffer order.
  CHECK(ca[0].kind == "sum");
  CHECK(ca[1].offset == 0);
  CHECK(ca[10].offset == 900);
}

TEST_CASE("The stall record names a gradient bucket during its all-reduce only, on both paths") {
  for (const bool overlap : {false, true}) {
    INFO("overlap " << overlap);
    std::vector<float> g = gradients();
    FakeCommunicator comm(3, g.data());
    GradientSync sync(comm, AllreduceAlgo::kRing, kParams, kBucketMb, overlap);
    run_step(sync, g);
    int next = 0;
    for (const Call& c : comm.calls())
      if (c.kind == "allreduce") CHECK(c.bucket == next++);
    CHECK(next == 10);
    // A wait after the step (a metrics sum, a checkpoint's broadcast) is in no bucket.
    CHECK(StallRecord::instance().snapshot().bucket == -1);
  }
}

TEST_CASE("Overlapped GradientSync sends a bucket as soon as backward has finished it") {
  std::vector<float> g = gradients();
  FakeCommunicator comm(2, g.data());
  GradientSync sync(comm, AllreduceAlgo::kRing, kParams, kBucketMb, /*overlap=*/true);
  StepTotals totals;
  sync.begin(g);
  sync.agree(totals);
  sync.ready(0, 250);  // buckets [0, 100) and [100, 200) are complete, [200, 300) is not
  // "Backward" goes on; the communication thread must get there without finish().
  std::size_t seen = 0;
  for (int i = 0; i < 2000 && seen < 3; ++i) {
    seen = comm.calls().size();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const auto calls = comm.calls();
  REQUIRE(calls.size() == 3);
  CHECK(calls[1].offset == 0);
  CHECK(calls[2].offset == 100);
  sync.finish();
  CHECK(comm.calls().size() == 11);
}

TEST_CASE("A stop agreed in the step sends no bucket, on both paths") {
  for (const bool overlap : {false, true}) {
    std::vector<float> g = gradients();
    const std::vector<float> before = g;
    FakeCommunicator comm(4, g.data());
    GradientSync sync(comm, AllreduceAlgo::kRing, kParams, kBucketMb, overlap);
    const StepTotals totals = run_step(sync, g, /*stop=*/1.0);
    INFO("overlap " << overlap);
    CHECK(totals.stop == 4.0);
    CHECK(comm.calls().size() == 1);  // the agreement only
    CHECK(g == before);
    // The next step runs normally.
    run_step(sync, g);
    CHECK(comm.calls().size() == 12);
  }
}

TEST_CASE("Exposed communication: all of it without overlap, at most all of it with overlap") {
  for (const bool overlap : {false, true}) {
    std::vector<float> g = gradients();
    FakeCommunicator comm(2, g.data());
    comm.delay_ms_ = 2;
    GradientSync sync(comm, AllreduceAlgo::kRing, kParams, kBucketMb, overlap);
    SyncTimes t;
    run_step(sync, g, 0.0, &t);
    INFO("overlap " << overlap << ": allreduce " << t.allreduce << " exposed " << t.exposed);
    CHECK(t.slices.size() == 11);
    CHECK(t.allreduce >= 10 * 0.002);
    CHECK(t.exposed >= 0.0);
    CHECK(t.exposed <= t.allreduce);
    if (!overlap) CHECK(t.exposed == t.allreduce);
    for (const auto& [start, end] : t.slices) CHECK(end >= start);
  }
}

TEST_CASE("A failure on the communication thread reaches finish(), and the next step works") {
  std::vector<float> g = gradients();
  FakeCommunicator comm(2, g.data());
  comm.fail_at_call_ = 3;  // the third bucket
  GradientSync sync(comm, AllreduceAlgo::kRing, kParams, kBucketMb, /*overlap=*/true);
  CHECK_THROWS_WITH(run_step(sync, g), "fake: link down");
  comm.fail_at_call_ = -1;
  const std::size_t before = comm.calls().size();
  CHECK(before == 3);  // the calls after the failure were dropped
  run_step(sync, g);
  CHECK(comm.calls().size() == before + 11);
}

TEST_CASE("GradientSync refuses ranges out of buffer order and a step without agreement") {
  std::vector<float> g = gradients();
  FakeCommunicator comm(2, g.data());
  GradientSync sync(comm, AllreduceAlgo::kRing, kParams, kBucketMb, /*overlap=*/true);
  sync.begin(g);
  CHECK_THROWS_AS(sync.ready(100, 10), std::logic_error);
  CHECK_THROWS_AS(sync.finish(), std::logic_error);
  StepTotals totals;
  sync.agree(totals);
  CHECK_THROWS_AS(sync.agree(totals), std::logic_error);
  sync.finish();
}
