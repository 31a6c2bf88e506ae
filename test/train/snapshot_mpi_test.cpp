// --snapshot-every (RAM snapshots replicated to the next node) at np 3 with every rank its own node (node_group_size 1, as
// emulated nodes are) and its own snapshot directory (its own "RAM"): snapshots every K
// steps, the newest two per directory, all complete (every CRC right); each node's own
// snapshot of a step holds the previous node's training state, so the digests agree and no
// node sends a whole copy (SnapshotWriter.h, "Replication"), while a node whose snapshot
// differs (a test hook) gets the previous node's whole, byte for byte, and passes its own on;
// a run resumed with --resume auto from them ends with the same bits as an uninterrupted run
// (logical shards), also when only one node's snapshots survive (read by that rank and
// broadcast), and a torn or corrupt newest snapshot is skipped for the previous one; the
// snapshots hold their step's state even when their thread copies it late.
// OMP_NUM_THREADS=1 and --threads 1: comparable bits.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "checkpoint/Checkpoint.h"
#include "checkpoint/SnapshotDigest.h"
#include "checkpoint/SnapshotStore.h"
#include "collectives/MpiCommunicator.h"
#include "common/Json.h"
#include "support/mpi_test_util.h"
#include "support/trainer_test_util.h"
#include "train/Trainer.h"

using namespace ringtrain;
using ringtrain::test::all_ranks;
using ringtrain::test::job_dir;
using ringtrain::test::world_rank;
using ringtrain::test::world_size;
namespace fs = std::filesystem;

namespace {

// Rank r's stand-in for its node's /dev/shm (`tag`: one per test case).
fs::path ram(int r, const std::string& tag = "ram") { return job_dir() / fmt::format("{}-{}", tag, r); }

// lenet5, 6 logical shards of batch 2 (two per rank at np 3), 10 steps per epoch.
TrainConfig snap_config(std::int64_t steps, const std::string& tag = "ram") {
  TrainConfig c = ringtrain::test::small_config(tag == "ram" ? "snapshots" : "snapshots-" + tag, 2);
  c.data.synthetic_train = 120;
  c.data.synthetic_test = 30;
  c.logical_shards = 6;
  c.max_steps = steps;
  c.threads = 1;
  c.tensorboard = false;
  c.schedule.base_lr = 0.01;
  c.snapshot_dir = ram(world_rank(), tag).string();
  return c;
}

// Trains c with each rank its own node; returns the final parameters.
std::vector<float> train(const TrainConfig& c) {
  MpiCommunicatorOptions options;
  options.node_group_size = 1;
  MpiCommunicator comm(MPI_COMM_WORLD, options);
  Trainer t(c, comm);
  t.run();
  return ringtrain::test::copy_params(t);
}

// Rank 0's summary.json of a run that has ended, on every rank.
Json rank0_summary(const TrainConfig& c) {
  std::string text;
  if (world_rank() == 0) {
    std::ifstream in(fs::path(c.run_dir) / "summary.json");
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  unsigned long n = text.size();
  MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG, 0, MPI_COMM_WORLD);
  text.resize(n);
  MPI_Bcast(text.data(), static_cast<int>(n), MPI_CHAR, 0, MPI_COMM_WORLD);
  return Json::parse(text);
}

// Resumes the run of snap_config() to step 20 from what --resume auto finds (no checkpoint
// directory holds anything); returns its parameters and summary.json's resumed_from.
std::vector<float> resume(Json* resumed_from) {
  TrainConfig c = snap_config(20);
  c.resume = "auto";
  c.checkpoint_dir = (job_dir() / "no-checkpoints").string();
  std::vector<float> params = train(c);
  *resumed_from = rank0_summary(c).at("resumed_from");
  return params;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && !a.empty() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Rank 0 changes the files, then every rank goes on.
template <typename F>
void on_rank0(F&& f) {
  if (world_rank() == 0) f();
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace

TEST_CASE("snapshots: every K steps on each node and the next, resume bit-identical", "[snapshot]") {
  REQUIRE(world_size() == 3);
  const std::vector<float> reference = train(snap_config(20));  // uninterrupted, no snapshots

  TrainConfig c = snap_config(17);
  c.snapshot_every = 5;  // at steps 5, 10, 15: the newest two stay
  // Each snapshot thread copies the parameters and optimizer state 200 ms late (the test
  // hook, SnapshotWriter.h), well after the next step's optimizer would have run had it not
  // waited for the copy (SnapshotWriter::fence): without that wait the snapshot of step 15
  // would hold step 16's parameters, and the resumed runs below would end elsewhere.
  ::setenv("RINGTRAIN_TEST_SNAPSHOT_SLOW_COPY_MS", "200", 1);
  train(c);
  ::unsetenv("RINGTRAIN_TEST_SNAPSHOT_SLOW_COPY_MS");
  // Each node holds its own snapshots; step 5's file is kept as the spare that the next
  // snapshot would be written into (SnapshotSlots.h). No node holds a whole copy of the
  // previous node's: its own snapshot of each step was found to hold the same state (equal
  // digests), so none was sent, and no directory for copies was made.
  const int k = world_rank();
  const fs::path own = snapshot_node_dir(ram(k), k, 3);
  const fs::path copy = snapshot_peer_dir(own, (k + 2) % 3);
  const std::vector<std::string> want{"slot-0.tmp", "snap-000000010.rtck", "snap-000000015.rtck"};
  CHECK(names_in(own) == want);
  CHECK(!fs::exists(copy));
  bool ok = names_in(own) == want && !fs::exists(copy);
  // One size for every file, the spare too: no slot is resized at a step boundary (the
  // metadata section is padded to one size on every node, SnapshotWriter.cpp).
  for (const auto& name : want) ok = ok && fs::file_size(own / name) == fs::file_size(own / want[2]);
  // What the digests stood for: the previous node's own snapshot of step 15 holds this
  // node's training state, the same parameters, buffers and optimizer state bit for bit and
  // the same position, so either resumes the run the same way.
  const fs::path previous = snapshot_node_dir(ram((k + 2) % 3), (k + 2) % 3, 3) / want[2];
  if (ok) {
    const auto mine = Checkpoint::deserialize(Checkpoint::read_file(own / want[2]), want[2]);
    const auto theirs = Checkpoint::deserialize(Checkpoint::read_file(previous), previous.string());
    ok = mine.meta.at("global_step").as_int() == 15 && same_bits(mine.params, theirs.params) &&
         mine.buffers == theirs.buffers && same_bits(mine.optimizer_state, theirs.optimizer_state) &&
         state_meta_crc(mine.meta) == state_meta_crc(theirs.meta);
  }
  REQUIRE(all_ranks(ok));
  // Rank 0 (node 0): its three snapshots counted as replicated on node 1, none sent whole.
  const Json stats = rank0_summary(c).at("snapshots");
  CHECK(stats.at("written").as_int() == 3);
  CHECK(stats.at("replicated_on_next_node").as_int() == 3);
  CHECK(stats.at("sent_to_next_node").as_int() == 0);
  CHECK(stats.at("received_from_previous_node").as_int() == 0);

  Json from;
  const std::vector<float> resumed = resume(&from);
  CHECK(all_ranks(same_bits(resumed, reference)));
  CHECK(from.at("kind").as_string() == "snapshot");
  CHECK(from.at("step").as_int() == 15);

  // Nodes 0 and 1 lost: only node 2's own snapshots are left (node 1's replica), which
  // rank 2 reads and sends to the others.
  on_rank0([&] {
    fs::remove_all(ram(0));
    fs::remove_all(ram(1));
  });
  const fs::path survivor = snapshot_node_dir(ram(2), 2, 3);
  const std::vector<float> from_copy = resume(&from);
  CHECK(all_ranks(same_bits(from_copy, reference)));
  CHECK(from.at("step").as_int() == 15);
  CHECK(from.at("holder_rank").as_int() == 2);
  CHECK(from.at("path").as_string() == (survivor / "snap-000000015.rtck").string());

  // The newest one torn (cut in half), then corrupt (one byte flipped): step 10 instead.
  const fs::path newest = survivor / "snap-000000015.rtck";
  // Read by rank 0 alone, which damages it: ranks leave resume() at different times, and a
  // rank still reading the file while rank 0 rewrote it saw it shrink (1 run in ~10).
  std::vector<std::byte> whole;
  on_rank0([&] { whole = Checkpoint::read_file(newest); });
  for (const char* damage : {"truncated", "flipped"}) {
    on_rank0([&] {
      std::vector<std::byte> bytes = whole;
      if (std::string(damage) == "truncated") {
        bytes.resize(bytes.size() / 2);
      } else {
        bytes[bytes.size() - 100] ^= std::byte{0xff};
      }
      std::ofstream(newest, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                    static_cast<std::streamsize>(bytes.size()));
    });
    const std::vector<float> from_older = resume(&from);
    INFO(damage);
    CHECK(all_ranks(same_bits(from_older, reference)));
    CHECK(from.at("step").as_int() == 10);
  }
}

TEST_CASE("snapshots: a next node whose snapshot differs is no copy; the previous node sends its own whole", "[snapshot]") {
  REQUIRE(world_size() == 3);
  TrainConfig c = snap_config(10, "alter");
  c.snapshot_every = 5;  // steps 5 and 10
  // Node 1's leader flips a bit of the first parameter in its own snapshots before sealing
  // them (the test hook, SnapshotWriter.h): complete and checksummed, but other bytes than
  // node 0's and node 2's. The slow-copy hook (1 ms) makes each snapshot wait for the
  // previous one, so that none is skipped on a loaded host.
  ::setenv("RINGTRAIN_TEST_SNAPSHOT_ALTER_NODE", "1", 1);
  ::setenv("RINGTRAIN_TEST_SNAPSHOT_SLOW_COPY_MS", "1", 1);
  train(c);
  ::unsetenv("RINGTRAIN_TEST_SNAPSHOT_ALTER_NODE");
  ::unsetenv("RINGTRAIN_TEST_SNAPSHOT_SLOW_COPY_MS");
  const auto own = [](int node) { return snapshot_node_dir(ram(node, "alter"), node, 3); };
  const std::vector<std::string> steps{"snap-000000005.rtck", "snap-000000010.rtck"};
  // Node 0's snapshots differ from node 1's: node 1 holds node 0's, whole and byte for byte.
  // Node 1's differ from node 2's: node 2 holds node 1's. Node 2's and node 0's agree: node 0
  // holds no copy.
  const int k = world_rank();
  bool ok = true;
  if (k == 0) {
    ok = !fs::exists(snapshot_peer_dir(own(0), 2));
  } else {
    const fs::path copies = snapshot_peer_dir(own(k), k - 1);
    for (const auto& name : steps) {
      ok = ok && fs::exists(copies / name) &&
           Checkpoint::read_file(copies / name) == Checkpoint::read_file(own(k - 1) / name);
    }
  }
  // The hook did what it says: node 1's snapshot of step 10 differs from node 0's in its
  // parameters, and reads back whole.
  if (k == 1) {
    const auto altered = Checkpoint::deserialize(Checkpoint::read_file(own(1) / steps[1]), steps[1]);
    const auto plain = Checkpoint::deserialize(Checkpoint::read_file(own(0) / steps[1]), steps[1]);
    ok = ok && !same_bits(altered.params, plain.params) &&
         same_bits(altered.optimizer_state, plain.optimizer_state);
  }
  CHECK(all_ranks(ok));
  const Json stats = rank0_summary(c).at("snapshots");
  CHECK(stats.at("written").as_int() == 2);
  CHECK(stats.at("replicated_on_next_node").as_int() == 0);
  CHECK(stats.at("sent_to_next_node").as_int() == 2);
  CHECK(stats.at("received_from_previous_node").as_int() == 0);
}
