// RAM snapshots of a synchronous run (--snapshot-every K, issue 23): every K steps each
// node's leader hands the training state at the step boundary to a thread of its own, which
// copies it straight into a mapped snapshot file (SnapshotSlots.h), computes the CRC32s,
// seals the file and renames it into place in its node's snapshot directory
// (SnapshotStore.h), keeping the newest two; the same bytes go to the next node's leader
// (node order, wrapping), which keeps them as that node's copy. The parameters are
// replicated, so one writer per node is enough.
//
// Off the step's critical path: at the step boundary the main thread copies only what the
// next step changes before its optimizer update (the metadata text and the buffers:
// batch-norm running statistics, or their mean in a copy); the step, sampler position and
// RNG state are in the metadata (every random stream derives from seed, epoch and step).
// The parameters and the optimizer state, nearly all of the bytes, are copied by the
// snapshot thread while the next step's data, forward and backward run: nothing writes them
// before that step's optimizer update, and the caller calls fence() before it (and before
// any other write of them), which returns at once unless the thread is still copying.
// Checksumming and renaming run on the snapshot thread too, which never calls MPI. The copy
// to the next node travels on a PeerChannel (its own communicator: its messages never match
// the all-reduce's) with non-blocking sends and receives that the main thread posts and
// tests at step boundaries, where the communication thread is idle (MPI_THREAD_SERIALIZED
// allows one thread in MPI at a time); MPI moves the bytes during the next steps' calls.
// Nothing but fence() waits on a snapshot before finish().
//
// For tests only: RINGTRAIN_TEST_SNAPSHOT_KILL_AT=<step> in a leader's environment makes its
// snapshot thread SIGKILL the process halfway through sealing the snapshot of that step
// (after the state is in the file, before its section table is whole): a node lost while a
// snapshot is being written, at a point a test can name. RINGTRAIN_TEST_SNAPSHOT_SLOW_COPY_MS
// =<ms> makes the snapshot thread sleep that long before it copies the parameters and the
// optimizer state: a thread that is late, so that a missing fence() lets the next optimizer
// update into the snapshot. With either set, take() waits for the previous snapshot instead
// of skipping, so every step's snapshot is written. RINGTRAIN_TEST_SNAPSHOT_SKIP=<parts>, a
// comma-separated list of "copy" (the parameters and optimizer state are not copied into
// the file) and "crc" (the sections' CRC32s are not computed; zeros are written): for
// measuring what each part of a snapshot costs the step (scripts/bench/snapshot_overhead.py
// --env); such snapshots do not hold the step's state or do not read back.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/Checkpoint.h"
#include "checkpoint/SnapshotSlots.h"
#include "collectives/Communicator.h"
#include "collectives/Mpi.h"
#include "common/Json.h"

namespace ringtrain {

class PeerChannel;

class SnapshotWriter {
 public:
  struct Stats {
    std::int64_t written = 0;        // own snapshots complete on this node
    std::int64_t skipped = 0;        // due while the previous one was still being written
    std::int64_t failed = 0;         // own or received copies not written (the previous ones stay)
    std::int64_t sent = 0;           // copies sent to the next node
    std::int64_t received = 0;       // copies from the previous node written here
    std::int64_t bytes = 0;          // size of the last snapshot
    double thread_cpu_seconds = 0.0;  // CPU time of the snapshot thread (copies, CRC, seal, rename)
    std::int64_t fence_waits = 0;     // fence() calls that found the thread still copying
    double fence_wait_seconds = 0.0;  // the main thread's (wall) time in them
  };

  // Collective over comm (the peer channel is a communicator of its own). `state_bytes`:
  // the size of the state (parameters, buffers, optimizer state); `meta_bytes`: about the
  // size of the metadata text (a dump(2) of the run's metadata at its start; the largest
  // over the ranks counts, so every node's files have one size). A leader makes
  // its snapshot files ready here at the size they will have, before the steps; the
  // metadata section is padded with spaces to a fixed size (SnapshotWriter.cpp says why).
  // `warn` prints a warning line (a snapshot not written, from the snapshot thread too).
  SnapshotWriter(Communicator& comm, std::filesystem::path root, int keep, std::size_t state_bytes,
                 std::size_t meta_bytes, std::function<void(const std::string&)> warn);
  // Joins the snapshot thread; never waits on MPI (after an error the peers may be gone).
  ~SnapshotWriter();
  SnapshotWriter(const SnapshotWriter&) = delete;
  SnapshotWriter& operator=(const SnapshotWriter&) = delete;

  // Whether this rank writes its node's snapshots.
  bool leader() const noexcept { return leader_; }
  const std::filesystem::path& root() const noexcept { return root_; }
  std::filesystem::path own_dir() const;

  // Node leaders, at a step boundary: copies the metadata and the buffers into a snapshot
  // file and hands it to the snapshot thread, which copies params and optimizer_state into
  // it later: they must stay unchanged, and alive, until fence() (or finish(), or the
  // destructor) returns. `buffers` is copied here (it may be a temporary). kBusy (nothing
  // copied) while the previous snapshot is still being written: this one is skipped.
  // kFailed when no file could be had (a full /dev/shm: a warning says why; the previous
  // snapshots stay).
  enum class Taken { kYes, kBusy, kFailed };
  Taken take(std::int64_t step, std::span<const float> params, std::span<const float> buffers,
             std::span<const float> optimizer_state, const Json& meta);
  // Every rank, before anything writes the parameters or the optimizer state handed to
  // take() (the optimizer update of the next step): waits until the snapshot thread has
  // copied them. An atomic load when it has (the usual case: it had the step's data,
  // forward and backward to do it in).
  void fence() {
    if (copying_.load(std::memory_order_acquire)) wait_for_copy();
  }
  // Every rank, every step boundary (cheap: a test or probe): moves the copies along.
  // Nothing to do unless exchanges(): a node leader with a next node.
  void progress();
  bool exchanges() const noexcept { return exchanges_; }
  // Collective, at the end of the run: every snapshot written, every copy delivered and
  // written on the next node.
  void finish();

  Stats stats() const;
  // CPU seconds of the calling thread (CLOCK_THREAD_CPUTIME_ID): a cost that a loaded
  // machine's preemptions do not inflate as they do wall time.
  static double thread_cpu_seconds() noexcept;
  Json stats_json() const;

 private:
  // Queues a task for the snapshot thread; `first`: ahead of those queued.
  void post(std::function<void()> task, bool first = false);
  void loop();
  void wait_idle();
  void wait_for_copy();
  void copy_sources();
  void write_own(std::int64_t step);
  void write_received(const std::vector<std::byte>& bytes, int from);
  void progress_send();
  void progress_receive();

  Communicator& comm_;
  std::filesystem::path root_;
  int keep_ = 2;
  std::function<void(const std::string&)> warn_;
  NodePlace place_;
  bool leader_ = false;
  std::unique_ptr<PeerChannel> peer_;  // with more than one node
  bool exchanges_ = false;             // a leader with a next node: sends and receives copies
  int next_leader_ = -1;

  // The snapshot thread's queue.
  mutable std::mutex mutex_;
  std::condition_variable work_;
  std::condition_variable idle_;
  std::deque<std::function<void()>> tasks_;
  int pending_ = 0;
  bool stopping_ = false;
  bool writing_ = false;             // the own snapshot in image_ is not sealed yet
  std::vector<std::byte> outgoing_;  // serialised, waiting to be sent (newest only)
  // Receive buffers the snapshot thread has written to a file, for the next receive.
  std::vector<std::vector<std::byte>> spare_received_;
  Stats stats_;
  // Set by take(), cleared (release) by the snapshot thread once it has copied params_ and
  // optimizer_state_ into image_; fence() waits on copied_ while it is set.
  std::atomic<bool> copying_{false};
  std::condition_variable copied_;

  // The own snapshot being written: the main thread fills in the metadata and buffers in
  // take(), the snapshot thread copies the parameters and optimizer state in and seals it;
  // writing_ hands it over.
  std::unique_ptr<SnapshotSlots> own_slots_;
  CheckpointLayout layout_;
  std::span<std::byte> image_;
  std::span<const float> params_;           // the caller's, read by the snapshot thread until
  std::span<const float> optimizer_state_;  // copying_ is cleared
  std::int64_t kill_at_ = -1;  // RINGTRAIN_TEST_SNAPSHOT_KILL_AT
  int slow_copy_ms_ = 0;       // RINGTRAIN_TEST_SNAPSHOT_SLOW_COPY_MS
  bool skip_copy_ = false;     // RINGTRAIN_TEST_SNAPSHOT_SKIP
  bool skip_crc_ = false;
  std::size_t meta_room_ = 0;  // the metadata section's size (main thread, in take())

  // Snapshot thread only.
  std::unique_ptr<SnapshotSlots> peer_slots_;  // the copies from the previous node
  std::vector<std::byte> copy_;                // the newest own snapshot, before it is outgoing_

  // Main thread only.
  std::vector<std::byte> sending_;
  MPI_Request send_request_ = MPI_REQUEST_NULL;
  std::vector<std::byte> receiving_;
  MPI_Request receive_request_ = MPI_REQUEST_NULL;
  bool end_sent_ = false;
  bool end_received_ = false;

  std::thread thread_;  // last: started once the state above exists
};

}  // namespace ringtrain
