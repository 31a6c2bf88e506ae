// RAM snapshots of a synchronous run (--snapshot-every K): every K steps each
// node's leader writes the training state straight into a mapped snapshot file
// (SnapshotSlots.h), and a thread of its own finishes the CRC32s, seals the file and renames
// it into place in its node's snapshot directory (SnapshotStore.h), keeping the newest two.
// The parameters are replicated, so one writer per node is enough.
//
// Replication: losing any one node must leave its snapshot on the survivors, so each node's
// snapshot of a step has a copy on the next node (node order, wrapping): the next node's own
// snapshot of that step when the 40-byte digests they exchange say the two hold the same
// state, else this node's file sent whole (SnapshotWriterReplication.cpp says why and how).
//
// Off the step's critical path, or as little of it as can be: the parameters and the
// optimizer state, nearly all of the bytes, are captured by the optimizer update of the
// snapshot's step itself (arm(), capture()): as it finishes each block, the block goes into
// the mapped snapshot file with streaming stores and its CRC32 is carried on, while the
// block is still in cache, so the state crosses the memory bus once more (the file's
// writes) instead of three or four times (a copy's reads, the writes and the reads for
// ownership, the CRC's reads). At the step boundary the main thread then copies the
// metadata text and the buffers (batch-norm running statistics, or their mean in a copy);
// the step, sampler position and RNG state are in the metadata (every random stream
// derives from seed, epoch and step). When the update did not capture them (no arm(): a
// caller without it, or a file that could not be had then), the snapshot thread copies the
// parameters and the optimizer state while the next step's data, forward and backward run:
// nothing writes them before that step's optimizer update, and the caller calls fence()
// before it (and before any other write of them), which returns at once unless the thread
// is still copying. Checksumming the rest, sealing and renaming run on the snapshot
// thread, which never calls MPI. The digests (to the previous node) and whole copies (to the
// next) travel on a PeerChannel (its own communicator: its messages never match the
// all-reduce's) with non-blocking sends and receives that the main thread posts and tests at
// step boundaries, where the communication thread is idle (MPI_THREAD_SERIALIZED allows one
// thread in MPI at a time); MPI moves the bytes during the next steps' calls. Nothing but
// fence() waits on a snapshot before finish(), which delivers every digest and every copy
// they call for (each leader ends its digests with a marker, then its copies once the next
// node's digests have ended and been compared).
//
// For tests only: RINGTRAIN_TEST_SNAPSHOT_KILL_AT=<step> in a leader's environment makes its
// snapshot thread SIGKILL the process halfway through sealing the snapshot of that step
// (after the state is in the file, before its section table is whole): a node lost while a
// snapshot is being written, at a point a test can name. RINGTRAIN_TEST_SNAPSHOT_SLOW_COPY_MS
// =<ms> makes the snapshot thread sleep that long before it starts on a snapshot (its copy
// of the parameters and the optimizer state, or its sealing of a captured one): a thread
// that is late, so that a missing fence() lets the next optimizer update into the snapshot. With either set, take() waits for the previous snapshot instead
// of skipping, so every step's snapshot is written. RINGTRAIN_TEST_SNAPSHOT_SKIP=<parts>, a
// comma-separated list of "copy" (the parameters and optimizer state are neither captured
// by the update nor copied into the file) and "crc" (the sections' CRC32s are not
// computed; zeros are written), and RINGTRAIN_TEST_SNAPSHOT_CRC_ON_THREAD=1 (the state's
// CRC32s computed by the snapshot thread from the file, not by capture() from cache) and
// RINGTRAIN_TEST_SNAPSHOT_COPY_ON_THREAD=1 (no capture in the update: the thread's copy): for
// measuring what each part of a snapshot costs the step (scripts/bench/bench.py overhead --feature snapshot
// --env); with SKIP, snapshots do not hold the step's state or do not read back (with "crc"
// every node's digests are zeros and match). RINGTRAIN_TEST_SNAPSHOT_ALTER_NODE=<node>: that
// node's leader flips a bit of the first parameter in its own snapshots before sealing them
// (so they are complete, checksummed, and hold other bytes than the other nodes'), for tests
// that the previous node does not count them as its copy and sends its own whole.
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
#include "checkpoint/SnapshotDigest.h"
#include "checkpoint/SnapshotSlots.h"
#include "checkpoint/SnapshotStats.h"
#include "collectives/Communicator.h"
#include "collectives/Mpi.h"
#include "collectives/PeerChannel.h"
#include "common/Json.h"

namespace ringtrain {

class SnapshotWriter {
 public:
  using Stats = SnapshotStats;

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
  // Capturing the state in the optimizer update (the usual way; take()'s copy on the
  // snapshot thread is the fallback). Node leaders, just before the optimizer update of a
  // step whose end take() will snapshot: opens the snapshot file and returns true if the
  // update is to report its blocks to capture() (false: not a leader, the previous snapshot
  // is still being written, no file could be had, or the state is not whole planes of the
  // parameters' layout; take() then does what it does without this). `params` and
  // `optimizer_state` are the arena and state the update writes (the optimizer state is
  // planes of params.size() floats at the parameters' offsets: Optimizer::state());
  // `buffers_bytes` the size of take()'s buffers.
  bool arm(std::span<const float> params, std::span<const float> optimizer_state, std::size_t buffers_bytes);
  // Node leaders: where the state is copied. false (the default): captured in the optimizer
  // update, on the step's own core while the state is in cache. true: arm() refuses and the
  // snapshot thread copies it during the next step's data, forward and backward, which
  // costs the step nothing when that thread has a core that training leaves idle (the
  // caller decides: Trainer, from OverlapPolicy). Measured (mlp, np 1 on a 2-core host,
  // scripts/bench/bench.py overhead --feature snapshot, 15 rounds each): the capture added 4.2% to the
  // steps a snapshot touches, the thread's copy 0.5%; where the ranks fill the cores the
  // thread's copy, about four times the capture's CPU (it reads what the capture finds in
  // cache), is taken from training instead. RINGTRAIN_TEST_SNAPSHOT_COPY_ON_THREAD=1 forces
  // true whatever is set here.
  void copy_on_thread(bool on) noexcept { copy_on_thread_ = leader_ && (copy_on_thread_forced_ || on); }
  bool copies_on_thread() const noexcept { return copy_on_thread_; }
  // The update's observer (Optimizer::set_update_observer): [offset, offset + count) of the
  // parameters and of each state plane is final for this step and still in cache. Streams
  // it into the file (non-temporal stores: StreamCopy.h), with the floats since the last
  // block that no block reports (padding, never updated), and carries the CRC32s on from
  // cache. Blocks come in increasing offset order (std::logic_error otherwise).
  void capture(std::size_t offset, std::size_t count);
  // The armed update did not happen (a stop discarded the step): the file stays a spare.
  void disarm() noexcept;
  bool armed() const noexcept { return armed_; }

  // Node leaders, once, at a step boundary after the first step of a launch (the caller
  // may call it at every boundary; only the first call does anything): has the snapshot
  // thread write the spare snapshot files' pages once more. Why: on this project's test
  // machines (PVM guests, whose page tables the host shadows) the first captures into the
  // files that the set-up had made ready took 12-14 ms of CPU in their streaming stores
  // against 1-1.5 ms for the later ones (mlp, 12 MB, np 1, perf samples; no page fault in
  // the guest), which looks like the host's mappings of those pages dropped during the
  // first step's set-up (oneDNN's primitives and buffers); written again after it, the
  // cost lands on the snapshot thread. arm() and take() wait for it if it is not done
  // (with K > 1 it has K - 1 steps; a wait is optimizer or step-path time).
  void warm();

  // Every rank, before anything writes the parameters or the optimizer state handed to
  // take() (the optimizer update of the next step): waits until the snapshot thread has
  // copied them. An atomic load when it has (the usual case: it had the step's data,
  // forward and backward to do it in).
  void fence() {
    if (copying_.load(std::memory_order_acquire)) wait_for_copy();
  }
  // Every rank, every step boundary (cheap: a test or probe): moves the digests and copies
  // along. Nothing to do unless exchanges(): a node leader with a next node.
  void progress();
  bool exchanges() const noexcept { return exchanges_; }
  // Collective, at the end of the run: every snapshot written, every digest delivered and
  // compared, every copy that called for delivered and written on the next node.
  void finish();

  Stats stats() const;
  // CPU seconds of the calling thread (CLOCK_THREAD_CPUTIME_ID): a cost that a loaded
  // machine's preemptions do not inflate as they do wall time.
  static double thread_cpu_seconds() noexcept;
  Json stats_json() const;

 private:
  // ---- The snapshot thread and the local write (SnapshotWriter.cpp).
  // Queues a task for the snapshot thread; `first`: ahead of those queued.
  void post(std::function<void()> task, bool first = false);
  void loop();
  void wait_idle();
  void wait_for_copy();
  void wait_for_warm();
  void copy_sources();
  void write_own(std::int64_t step, bool copy, Checkpoint::KnownCrcs known, std::uint32_t meta_crc);
  // Makes the next snapshot file of `slots` ready off the step's path (SnapshotSlots::prepare).
  // A failure here is not reported: the snapshot's own open() tries again and warns.
  static void prepare_next(SnapshotSlots& slots, std::size_t bytes) noexcept;

  // ---- The capture in the optimizer update (SnapshotWriterCapture.cpp).
  void capture_range(std::size_t offset, std::size_t count);
  bool finish_capture(std::size_t meta_bytes, std::size_t buffers_bytes);
  Checkpoint::KnownCrcs captured_crcs() const;

  // ---- Replication to the next node (SnapshotWriterReplication.cpp).
  void write_received(const std::vector<std::byte>& bytes, int from);
  // mutex_ held: keeps this node's digest of a step and queues it for the previous node.
  void record_own_digest(const SnapshotDigest& digest);
  // Snapshot thread: the next node's digest against this node's own of that step; queues
  // this node's file whole for the next node unless they hold the same state.
  void compare_with_next(const SnapshotDigest& next);
  void progress_digests();
  void progress_send();
  void progress_receive();
  // A digest or an end marker, received and handled; false for a whole snapshot (left to
  // progress_receive()'s non-blocking receive).
  bool receive_small(const PeerChannel::Arrival& arrival);
  bool finish_round();  // finish(): one poll of everything; true when all is delivered

  Communicator& comm_;
  std::filesystem::path root_;
  int keep_ = 2;
  std::function<void(const std::string&)> warn_;
  NodePlace place_;
  bool leader_ = false;
  std::unique_ptr<PeerChannel> peer_;  // with more than one node
  bool exchanges_ = false;             // a leader with a next node: sends and receives digests and copies
  int next_leader_ = -1;
  int previous_leader_ = -1;

  // The snapshot thread's queue.
  mutable std::mutex mutex_;
  std::condition_variable work_;
  std::condition_variable idle_;
  std::deque<std::function<void()>> tasks_;
  int pending_ = 0;
  bool stopping_ = false;
  bool writing_ = false;             // the own snapshot in image_ is not sealed yet
  bool warming_ = false;             // warm()'s task has own_slots_ (idle_ when it ends)
  std::vector<std::byte> outgoing_;  // a whole own snapshot, waiting to be sent (newest only)
  std::deque<SnapshotDigest> own_digests_;  // this node's newest (kDigestHistory), for compare_with_next()
  std::deque<SnapshotDigest> digests_out_;  // waiting to be sent to the previous node
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
  bool alter_ = false;         // RINGTRAIN_TEST_SNAPSHOT_ALTER_NODE names this leader's node
  int slow_copy_ms_ = 0;       // RINGTRAIN_TEST_SNAPSHOT_SLOW_COPY_MS
  bool skip_copy_ = false;     // RINGTRAIN_TEST_SNAPSHOT_SKIP
  bool skip_crc_ = false;
  std::size_t meta_room_ = 0;  // the metadata section's size (main thread, in take())
  // RINGTRAIN_TEST_SNAPSHOT_CRC_ON_THREAD=1: with the capture in the update, the snapshot
  // thread computes the state's CRC32s from the file (as it does after its own copy) rather
  // than capture() from cache; for measuring which costs the step less.
  bool crc_on_thread_ = false;
  // copy_on_thread(): arm() refuses, so the snapshot thread copies the state after take().
  // RINGTRAIN_TEST_SNAPSHOT_COPY_ON_THREAD=1 (copy_on_thread_forced_) sets it whatever the
  // caller's choice, for measuring one way against the other.
  bool copy_on_thread_ = false;
  bool copy_on_thread_forced_ = false;

  // The capture in the optimizer update (main thread: arm() to take()).
  bool armed_ = false;
  bool warmed_ = false;  // warm() has run (main thread)
  std::span<const float> capture_params_;
  std::span<const float> capture_state_;
  std::size_t capture_planes_ = 0;   // capture_state_.size() / capture_params_.size()
  std::size_t capture_buffers_ = 0;  // bytes of the buffers section the armed layout has room for
  std::size_t cursor_ = 0;           // floats of each plane captured so far
  std::uint32_t params_crc_ = 0;
  std::vector<std::uint32_t> plane_crcs_;

  // Snapshot thread only.
  std::unique_ptr<SnapshotSlots> peer_slots_;  // the whole copies from the previous node

  // Main thread only.
  std::vector<std::byte> sending_;
  MPI_Request send_request_ = MPI_REQUEST_NULL;
  std::vector<std::byte> receiving_;
  MPI_Request receive_request_ = MPI_REQUEST_NULL;
  bool end_sent_ = false;
  bool end_received_ = false;
  std::vector<std::byte> digest_sending_;
  MPI_Request digest_request_ = MPI_REQUEST_NULL;
  bool digests_end_sent_ = false;
  bool digests_end_received_ = false;

  std::thread thread_;  // last: started once the state above exists
};

}  // namespace ringtrain
