// SnapshotWriter: a RAM snapshot holds the state of its step although training goes on
// while its thread writes it (fence, capture in the optimizer update, copy on the thread),
// and warm() prepares the spare files without touching the snapshots.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "checkpoint/Checkpoint.h"
#include "checkpoint/SnapshotStore.h"
#include "checkpoint/SnapshotWriter.h"
#include "checkpoint_test_util.h"
#include "collectives/SelfCommunicator.h"

using namespace ringtrain;
using namespace ringtrain::test;

TEST_CASE("SnapshotWriter: a snapshot holds its step's state although the next update ran before its thread copied it") {
  // The snapshot thread copies the parameters and optimizer state after take() returns
  // (SnapshotWriter.h); here it sleeps 100 ms first (the test hook), while this thread, as
  // the training loop does, changes the buffers at once (the next forward) and the parameters
  // and optimizer state after fence() (the next optimizer update). Without the fence, or
  // with the buffers copied late, the snapshot would hold the changed values.
  const auto root = temp_dir() / "ram";
  CheckpointData d = sample();
  d.meta.set("global_step", 10);
  SelfCommunicator comm;
  std::atomic<int> warnings{0};  // from the snapshot thread too: counted, checked below
  ::setenv("RINGTRAIN_TEST_SNAPSHOT_SLOW_COPY_MS", "100", 1);
  SnapshotWriter writer(comm, root, 2, 4 * (d.params.size() + d.buffers.size() + d.optimizer_state.size()),
                        d.meta.dump(2).size(), [&](const std::string&) { ++warnings; });
  ::unsetenv("RINGTRAIN_TEST_SNAPSHOT_SLOW_COPY_MS");
  std::vector<float> params = d.params, buffers = d.buffers, state = d.optimizer_state;
  REQUIRE(writer.take(10, params, buffers, state, d.meta) == SnapshotWriter::Taken::kYes);
  for (float& b : buffers) b = -1.0f;  // the next forward
  writer.fence();                       // then its optimizer update
  for (float& p : params) p += 1.0f;
  for (float& v : state) v = 7.0f;
  writer.finish();
  const auto path = writer.own_dir() / snapshot_file_name(10);
  const CheckpointData back = Checkpoint::deserialize(Checkpoint::read_file(path), path.string());
  auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
  };
  CHECK(same_bits(back.params, d.params));
  CHECK(same_bits(back.buffers, d.buffers));
  CHECK(same_bits(back.optimizer_state, d.optimizer_state));
  CHECK(back.meta.at("global_step").as_int() == 10);
  const SnapshotWriter::Stats stats = writer.stats();
  CHECK(stats.written == 1);
  CHECK(stats.fence_waits <= 1);
  CHECK(warnings == 0);
}

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
}

}  // namespace

TEST_CASE("SnapshotWriter: the state captured block by block in the optimizer update is the update's, CRCs whole") {
  // arm() before the update, capture() after each of its blocks (as Optimizer's update
  // observer calls it), take() at the step boundary. The blocks leave out floats (padding:
  // [100, 112) and the tail [960, 1000)), which hold values no zeroed file has, and the
  // state is two planes (Adam's m and v), whose CRCs are combined. This thread then changes
  // everything at once, without fence() (the next update): the snapshot must still hold the
  // update's bits, and read back (every CRC checked), with the CRCs computed from cache or,
  // under the test hook, by the snapshot thread.
  const bool crc_on_thread = GENERATE(false, true);
  const auto root = temp_dir() / "ram";
  CheckpointData d = sample();
  d.meta.set("global_step", 10);
  SelfCommunicator comm;
  std::atomic<int> warnings{0};
  if (crc_on_thread) ::setenv("RINGTRAIN_TEST_SNAPSHOT_CRC_ON_THREAD", "1", 1);
  SnapshotWriter writer(comm, root, 2, 4 * (d.params.size() + d.buffers.size() + 2 * d.params.size()),
                        d.meta.dump(2).size(), [&](const std::string&) { ++warnings; });
  ::unsetenv("RINGTRAIN_TEST_SNAPSHOT_CRC_ON_THREAD");
  std::vector<float> params = d.params, buffers = d.buffers, state(2 * params.size(), 0.5f);
  REQUIRE(writer.arm(params, state, 4 * buffers.size()));
  CHECK(writer.armed());
  auto update = [&](std::size_t offset, std::size_t count) {
    for (std::size_t i = offset; i < offset + count; ++i) {
      params[i] += 1.0f;
      state[i] = 2.0f + static_cast<float>(i);
      state[params.size() + i] = 3.0f * static_cast<float>(i);
    }
    writer.capture(offset, count);
  };
  update(0, 100);
  update(112, 288);
  update(400, 560);
  const std::vector<float> want_params = params, want_state = state;
  REQUIRE(writer.take(10, params, buffers, state, d.meta) == SnapshotWriter::Taken::kYes);
  CHECK_FALSE(writer.armed());
  for (float& p : params) p = -5.0f;  // the next update, at once
  for (float& v : state) v = -6.0f;
  writer.finish();
  const auto path = writer.own_dir() / snapshot_file_name(10);
  const CheckpointData back = Checkpoint::deserialize(Checkpoint::read_file(path), path.string());
  CHECK(same_bits(back.params, want_params));
  CHECK(same_bits(back.optimizer_state, want_state));
  CHECK(same_bits(back.buffers, d.buffers));
  const SnapshotWriter::Stats stats = writer.stats();
  CHECK(stats.written == 1);
  CHECK(stats.captured == 1);
  CHECK(stats.fence_waits == 0);
  CHECK(warnings == 0);
}

TEST_CASE("SnapshotWriter: an armed update that reports no block is captured whole at take(); blocks out of order throw") {
  const auto root = temp_dir() / "ram";
  CheckpointData d = sample();
  SelfCommunicator comm;
  SnapshotWriter writer(comm, root, 2, 4 * (d.params.size() + d.buffers.size() + d.optimizer_state.size()),
                        d.meta.dump(2).size(), [](const std::string&) {});
  std::vector<float> params = d.params, state = d.optimizer_state;
  REQUIRE(writer.arm(params, state, 4 * d.buffers.size()));
  writer.capture(500, 10);
  CHECK_THROWS_AS(writer.capture(400, 10), std::logic_error);   // before the last block
  CHECK_THROWS_AS(writer.capture(990, 20), std::logic_error);   // past the end
  writer.disarm();
  CHECK_FALSE(writer.armed());
  // Armed, and the update ran without reporting (an optimizer without an observer).
  REQUIRE(writer.arm(params, state, 4 * d.buffers.size()));
  for (float& p : params) p *= 2.0f;
  for (float& v : state) v += 1.0f;
  const std::vector<float> want_params = params, want_state = state;
  REQUIRE(writer.take(1234, params, d.buffers, state, d.meta) == SnapshotWriter::Taken::kYes);
  for (float& p : params) p = 0.0f;
  writer.finish();
  const auto path = writer.own_dir() / snapshot_file_name(1234);
  const CheckpointData back = Checkpoint::deserialize(Checkpoint::read_file(path), path.string());
  CHECK(same_bits(back.params, want_params));
  CHECK(same_bits(back.optimizer_state, want_state));
  CHECK(writer.stats().captured == 1);
}

TEST_CASE("SnapshotWriter: under RINGTRAIN_TEST_SNAPSHOT_COPY_ON_THREAD the update captures nothing; the thread copies") {
  const auto root = temp_dir() / "ram";
  CheckpointData d = sample();
  SelfCommunicator comm;
  ::setenv("RINGTRAIN_TEST_SNAPSHOT_COPY_ON_THREAD", "1", 1);
  SnapshotWriter writer(comm, root, 2, 4 * (d.params.size() + d.buffers.size() + d.optimizer_state.size()),
                        d.meta.dump(2).size(), [](const std::string&) {});
  ::unsetenv("RINGTRAIN_TEST_SNAPSHOT_COPY_ON_THREAD");
  std::vector<float> params = d.params, state = d.optimizer_state;
  CHECK_FALSE(writer.arm(params, state, 4 * d.buffers.size()));
  REQUIRE(writer.take(1234, params, d.buffers, state, d.meta) == SnapshotWriter::Taken::kYes);
  writer.fence();
  for (float& p : params) p = 0.0f;
  writer.finish();
  const auto path = writer.own_dir() / snapshot_file_name(1234);
  const CheckpointData back = Checkpoint::deserialize(Checkpoint::read_file(path), path.string());
  CHECK(same_bits(back.params, d.params));
  CHECK(writer.stats().captured == 0);
}

TEST_CASE("SnapshotWriter::copy_on_thread: the caller's choice of where the state is copied; the hook forces the thread") {
  const auto root = temp_dir() / "ram";
  CheckpointData d = sample();
  SelfCommunicator comm;
  const std::size_t bytes = 4 * (d.params.size() + d.buffers.size() + d.optimizer_state.size());
  std::vector<float> params = d.params, state = d.optimizer_state;
  {
    SnapshotWriter writer(comm, root, 2, bytes, d.meta.dump(2).size(), [](const std::string&) {});
    CHECK_FALSE(writer.copies_on_thread());  // the default: the update captures
    writer.copy_on_thread(true);
    CHECK(writer.copies_on_thread());
    CHECK(writer.stats_json().at("copy").as_string() == "thread");
    CHECK_FALSE(writer.arm(params, state, 4 * d.buffers.size()));
    REQUIRE(writer.take(1234, params, d.buffers, state, d.meta) == SnapshotWriter::Taken::kYes);
    writer.fence();
    for (float& p : params) p = 0.0f;  // after fence(): the thread's copy holds the values before
    writer.finish();
    const auto path = writer.own_dir() / snapshot_file_name(1234);
    const CheckpointData back = Checkpoint::deserialize(Checkpoint::read_file(path), path.string());
    CHECK(same_bits(back.params, d.params));
    CHECK(same_bits(back.optimizer_state, d.optimizer_state));
    CHECK(writer.stats().captured == 0);
    writer.copy_on_thread(false);  // back to the capture
    CHECK(writer.stats_json().at("copy").as_string() == "update");
    params = d.params;
    REQUIRE(writer.arm(params, state, 4 * d.buffers.size()));
    writer.disarm();
  }
  ::setenv("RINGTRAIN_TEST_SNAPSHOT_COPY_ON_THREAD", "1", 1);
  SnapshotWriter forced(comm, temp_dir() / "ram2", 2, bytes, d.meta.dump(2).size(), [](const std::string&) {});
  ::unsetenv("RINGTRAIN_TEST_SNAPSHOT_COPY_ON_THREAD");
  forced.copy_on_thread(false);
  CHECK(forced.copies_on_thread());
  CHECK_FALSE(forced.arm(params, state, 4 * d.buffers.size()));
}

TEST_CASE("SnapshotWriter::warm rewrites only the spare files, once; the snapshots stay whole and the next is taken") {
  const auto root = temp_dir() / "ram";
  CheckpointData d = sample();
  SelfCommunicator comm;
  SnapshotWriter writer(comm, root, 2, 4 * (d.params.size() + d.buffers.size() + d.optimizer_state.size()),
                        d.meta.dump(2).size(), [](const std::string&) {});
  std::vector<float> params = d.params, state = d.optimizer_state;
  const auto take = [&](std::int64_t step) {
    d.meta.set("global_step", step);
    for (float& p : params) p += 1.0f;
    REQUIRE(writer.take(step, params, d.buffers, state, d.meta) == SnapshotWriter::Taken::kYes);
    writer.finish();  // the thread done (one node: nothing to exchange)
  };
  take(10);
  take(20);
  const std::vector<float> params_20 = params;
  // A spare holds an older state's bytes (no zero run as long as the file); warm() zeroes it.
  const auto spares = [&] {
    std::vector<std::filesystem::path> found;
    for (const auto& e : std::filesystem::directory_iterator(writer.own_dir())) {
      if (e.path().extension() == ".tmp") found.push_back(e.path());
    }
    return found;
  };
  const auto all_zero = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return !bytes.empty() && std::all_of(bytes.begin(), bytes.end(), [](char c) { return c == 0; });
  };
  take(30);  // step 10's file becomes the spare
  REQUIRE(spares().size() == 1);
  CHECK_FALSE(all_zero(spares()[0]));
  writer.warm();
  writer.finish();
  CHECK(all_zero(spares()[0]));
  for (const std::int64_t step : {20, 30}) {
    const auto path = writer.own_dir() / snapshot_file_name(step);
    const CheckpointData back = Checkpoint::deserialize(Checkpoint::read_file(path), path.string());
    CHECK(back.meta.at("global_step").as_int() == step);
    if (step == 20) CHECK(same_bits(back.params, params_20));
  }
  take(40);  // warm() released the files: not busy
  const auto path = writer.own_dir() / snapshot_file_name(40);
  CHECK(same_bits(Checkpoint::deserialize(Checkpoint::read_file(path), path.string()).params, params));
  // Only the first call does anything: the new spare (step 20's file) keeps its bytes.
  writer.warm();
  writer.finish();
  REQUIRE(spares().size() == 1);
  CHECK_FALSE(all_zero(spares()[0]));
  CHECK(writer.stats().written == 4);
  CHECK(writer.stats().skipped == 0);
}
