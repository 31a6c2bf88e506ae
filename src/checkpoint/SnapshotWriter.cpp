// RAM snapshots: the set-up, the copy at the step boundary, the snapshot thread and the local
// write (SnapshotWriter.h). The capture in the update and the replication have files of their own.
#include "checkpoint/SnapshotWriter.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "checkpoint/SnapshotDigest.h"
#include "checkpoint/SnapshotStore.h"

namespace ringtrain {
namespace {

// The snapshot thread runs at SCHED_BATCH: its wake-up does not preempt a running thread,
// and it keeps a normal share of the cores. Why: at normal policy (lenet5, np 2, a 2-core
// host at load 11) the step a snapshot was taken at took 20-30 ms longer on average than
// the others while the main thread spent 0.5 ms of CPU on it, which looks like the woken
// thread taking the core. Not nice 10 as well: at load 12 that starved the thread (mlp: 5
// of 7 snapshots skipped as still being written, against 0 of 7 at normal priority), and a
// skipped snapshot is K more steps to replay. Under that load the change could not be shown
// to shorten steps; a quiet measurement decides. Best effort: where refused, it runs as is.
void yield_to_training() noexcept {
  sched_param param{};
  param.sched_priority = 0;
  pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
}

// The metadata section of every own snapshot is its JSON text padded with spaces (JSON
// whitespace, which every reader skips) to a fixed size: the text's size at the first
// snapshot plus this much room for its numbers to grow. So every snapshot file of a run has
// one size and a slot is never resized at the step boundary. Why: shrinking a mapped tmpfs
// file (ftruncate) unmaps its tail pages from every thread's page tables, a TLB shootdown
// that interrupts the other cores and waits for them; on this project's (virtual) test
// machines that cost the main thread about 0.5 ms per snapshot (perf, lenet5 np 2), ten
// times the copy of lenet5's 0.5 MB state. Growing a file (a larger text) has no such cost.
constexpr std::size_t kMetaSlack = 4096;

// Every own snapshot file made ready before the first step (SnapshotSlots::prepare_all). A
// failure here is not reported: the snapshot's own open() tries again and warns.
void prepare_all(SnapshotSlots& slots, std::size_t bytes) noexcept {
  try {
    slots.prepare_all(bytes);
  } catch (const std::exception&) {
  }
}

// A test hook's positive number (SnapshotWriter.h), or -1.
std::int64_t positive_from_env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  return *end == '\0' && n > 0 ? n : -1;
}

// A test hook's node number (SnapshotWriter.h): a number >= 0, or -1.
int node_from_env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end == '\0' && n >= 0 && n < 1 << 20 ? static_cast<int>(n) : -1;
}

// RINGTRAIN_TEST_SNAPSHOT_SKIP (SnapshotWriter.h): a comma-separated list of parts of a
// snapshot's work to leave out, "copy" and "crc". Throws std::invalid_argument naming the
// variable for anything else.
std::pair<bool, bool> skipped_parts_from_env() {
  const char* v = std::getenv("RINGTRAIN_TEST_SNAPSHOT_SKIP");
  bool copy = false, crc = false;
  if (!v) return {copy, crc};
  std::string list = v;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t end = std::min(list.find(',', at), list.size());
    const std::string part = list.substr(at, end - at);
    if (part == "copy") {
      copy = true;
    } else if (part == "crc") {
      crc = true;
    } else if (!part.empty()) {
      throw std::invalid_argument(fmt::format(
          "RINGTRAIN_TEST_SNAPSHOT_SKIP: unknown part \"{}\" (expected a comma-separated list of copy, crc)", part));
    }
    at = end + 1;
  }
  return {copy, crc};
}

// The test hook's kill: the state is in the file, its header and section table half
// written (the second half zeros); then the process dies as a lost node does.
[[noreturn]] void die_while_sealing(std::span<std::byte> image, const CheckpointLayout& layout) {
  Checkpoint::seal(image, layout);
  const std::size_t header = layout.offset[0];
  std::memset(image.data() + header / 2, 0, header - header / 2);
  ::kill(::getpid(), SIGKILL);
  std::abort();
}

}  // namespace

double SnapshotWriter::thread_cpu_seconds() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

SnapshotWriter::SnapshotWriter(Communicator& comm, std::filesystem::path root, int keep, std::size_t state_bytes,
                               std::size_t meta_bytes, std::function<void(const std::string&)> warn)
    : comm_(comm),
      root_(std::move(root)),
      keep_(keep),
      warn_(std::move(warn)),
      place_(comm.node_place()) {
  std::tie(skip_copy_, skip_crc_) = skipped_parts_from_env();  // every rank: a bad value fails on all
  leader_ = place_.leader_of(place_.node) == comm.rank();
  // The largest of the ranks' (their texts differ by a digit or two): the same room on every
  // node, so that the copies from the previous node fit the slots made ready for them.
  const std::vector<std::uint64_t> metas = comm.allgather(static_cast<std::uint64_t>(meta_bytes));
  meta_room_ = static_cast<std::size_t>(*std::max_element(metas.begin(), metas.end())) + kMetaSlack;
  if (leader_) {
    kill_at_ = positive_from_env("RINGTRAIN_TEST_SNAPSHOT_KILL_AT");
    const std::int64_t slow = positive_from_env("RINGTRAIN_TEST_SNAPSHOT_SLOW_COPY_MS");
    slow_copy_ms_ = static_cast<int>(std::min<std::int64_t>(slow, 60000));  // -1 when unset: off
    crc_on_thread_ = positive_from_env("RINGTRAIN_TEST_SNAPSHOT_CRC_ON_THREAD") > 0;
    copy_on_thread_forced_ = positive_from_env("RINGTRAIN_TEST_SNAPSHOT_COPY_ON_THREAD") > 0;
    copy_on_thread_ = copy_on_thread_forced_;
    alter_ = node_from_env("RINGTRAIN_TEST_SNAPSHOT_ALTER_NODE") == place_.node;
  }
  // The channel's communicator is made (and freed) by every rank, as MPI wants; the
  // leaders use it.
  if (place_.nodes > 1) {
    peer_ = std::make_unique<PeerChannel>(comm);
    exchanges_ = leader_;
    next_leader_ = place_.leader_of((place_.node + 1) % place_.nodes);
    previous_leader_ = place_.leader_of((place_.node + place_.nodes - 1) % place_.nodes);
  }
  // Every own snapshot file this leader will write, made ready before the first step at the
  // one size they all have. Not the previous node's copies: one comes only when that node's
  // snapshot and this node's differ (SnapshotWriter.h), and its directory and files are
  // made by the first one (on the snapshot thread), so a run whose nodes agree has none.
  const std::size_t file_bytes = Checkpoint::layout(meta_room_, state_bytes, 0, 0).total;
  if (leader_) {
    own_slots_ = std::make_unique<SnapshotSlots>(own_dir(), keep_);
    prepare_all(*own_slots_, file_bytes);
  }
  if (exchanges_) {
    const int from = (place_.node + place_.nodes - 1) % place_.nodes;
    peer_slots_ = std::make_unique<SnapshotSlots>(snapshot_peer_dir(own_dir(), from), keep_);
  }
  thread_ = std::thread([this] { loop(); });
}

SnapshotWriter::~SnapshotWriter() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  if (thread_.joinable()) thread_.join();
  // After an error the transfers may be unfinished and their peers gone: MPI may still
  // touch these buffers until MPI_Abort ends the process, so they are left to it.
  if (send_request_ != MPI_REQUEST_NULL) (void)new std::vector<std::byte>(std::move(sending_));
  if (receive_request_ != MPI_REQUEST_NULL) (void)new std::vector<std::byte>(std::move(receiving_));
  if (digest_request_ != MPI_REQUEST_NULL) (void)new std::vector<std::byte>(std::move(digest_sending_));
}

std::filesystem::path SnapshotWriter::own_dir() const { return snapshot_node_dir(root_, place_.node, place_.nodes); }

void SnapshotWriter::post(std::function<void()> task, bool first) {
  {
    std::lock_guard lock(mutex_);
    if (first) {
      tasks_.push_front(std::move(task));
    } else {
      tasks_.push_back(std::move(task));
    }
    ++pending_;
  }
  work_.notify_one();
}

void SnapshotWriter::loop() {
  yield_to_training();
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, nothing left
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    const double cpu0 = thread_cpu_seconds();
    task();  // tasks catch their own errors
    const double cpu = thread_cpu_seconds() - cpu0;
    lock.lock();
    stats_.thread_cpu_seconds += cpu;
    if (--pending_ == 0) idle_.notify_all();
  }
}

void SnapshotWriter::wait_idle() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return pending_ == 0; });
}

void SnapshotWriter::wait_for_copy() {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex_);
  copied_.wait(lock, [&] { return !copying_.load(std::memory_order_acquire); });
  ++stats_.fence_waits;
  stats_.fence_wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void SnapshotWriter::copy_sources() {
  const std::span<const std::byte> params = std::as_bytes(params_);
  const std::span<const std::byte> state = std::as_bytes(optimizer_state_);
  if (!params.empty() && !skip_copy_) std::memcpy(image_.data() + layout_.offset[1], params.data(), params.size());
  if (!state.empty() && !skip_copy_) std::memcpy(image_.data() + layout_.offset[3], state.data(), state.size());
  params_ = {};
  optimizer_state_ = {};
  {
    std::lock_guard lock(mutex_);
    copying_.store(false, std::memory_order_release);
  }
  copied_.notify_all();
}

void SnapshotWriter::warm() {
  if (warmed_ || !leader_) return;
  warmed_ = true;
  {
    std::lock_guard lock(mutex_);
    if (writing_) return;  // the thread is on a snapshot: its spares stay as they are
    warming_ = true;       // own_slots_ is the thread's until it is done (wait_for_warm())
  }
  post([this] {
    own_slots_->rewrite_spares();
    {
      std::lock_guard lock(mutex_);
      warming_ = false;
    }
    idle_.notify_all();
  });
}

void SnapshotWriter::wait_for_warm() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return !warming_; });
}
SnapshotWriter::Taken SnapshotWriter::take(std::int64_t step, std::span<const float> params,
                                           std::span<const float> buffers, std::span<const float> optimizer_state,
                                           const Json& meta) {
  const std::string meta_text = meta.dump(2);
  const std::span<const std::byte> now = std::as_bytes(buffers);
  // Captured by the optimizer update (arm()): only the metadata and the buffers are left.
  const bool captured = finish_capture(meta_text.size(), now.size());
  // Under a test hook no snapshot is skipped, so the one the test names is written
  // whatever the load (a loaded host skipped step 15's while step 10's was still sealing).
  if (!captured && (kill_at_ >= 0 || slow_copy_ms_ > 0)) wait_idle();
  if (!captured) wait_for_warm();
  {
    std::lock_guard lock(mutex_);
    if (writing_) {
      ++stats_.skipped;
      if (exchanges_) record_own_digest(SnapshotDigest{step, false, 0, {}});  // none of this step here
      return Taken::kBusy;
    }
  }
  // The snapshot thread leaves own_slots_, image_ and the sources alone until writing_ is
  // set again. Here only what the next step changes before its optimizer update: the
  // metadata and the buffers (sections 0 and 2); the thread copies sections 1 and 3 unless
  // the update captured them.
  try {
    if (meta_text.size() > meta_room_) meta_room_ = meta_text.size() + kMetaSlack;  // the files grow, once
    if (!captured) {
      layout_ = Checkpoint::layout(meta_room_, params.size_bytes(), now.size(), optimizer_state.size_bytes());
      image_ = own_slots_->open(layout_.total);
    }
    std::memcpy(image_.data() + layout_.offset[0], meta_text.data(), meta_text.size());
    std::memset(image_.data() + layout_.offset[0] + meta_text.size(), ' ', meta_room_ - meta_text.size());
    if (!now.empty()) std::memcpy(image_.data() + layout_.offset[2], now.data(), now.size());
  } catch (const std::exception& e) {  // no room for the file: this one is lost, training goes on
    own_slots_->abandon();
    warn_(fmt::format("snapshot at step {} not written ({}); the previous one stays", step, e.what()));
    std::lock_guard lock(mutex_);
    ++stats_.failed;
    if (exchanges_) record_own_digest(SnapshotDigest{step, false, 0, {}});
    return Taken::kFailed;
  }
  Checkpoint::KnownCrcs known = captured ? captured_crcs() : Checkpoint::KnownCrcs{};
  if (skip_crc_) known = {0u, 0u, 0u, 0u};  // measurements only: it does not read back
  // The metadata's part of the digest for the previous node (SnapshotDigest.h): a few
  // microseconds of the main thread's, which holds the Json.
  const std::uint32_t meta_crc = exchanges_ ? state_meta_crc(meta) : 0;
  {
    std::lock_guard lock(mutex_);
    writing_ = true;
    if (captured) ++stats_.captured;
    if (!captured) {
      params_ = params;
      optimizer_state_ = optimizer_state;
      copying_.store(true, std::memory_order_relaxed);  // published by the lock, read by fence() in this thread
    }
  }
  // Ahead of any received copy still queued: the next optimizer update may wait for its copy.
  post([this, step, captured, known, meta_crc] { write_own(step, !captured, known, meta_crc); }, /*first=*/true);
  return Taken::kYes;
}

void SnapshotWriter::write_own(std::int64_t step, bool copy, Checkpoint::KnownCrcs known, std::uint32_t meta_crc) {
  if (slow_copy_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(slow_copy_ms_));
  if (copy) copy_sources();  // first: the main thread's next optimizer update waits for it (fence())
  SnapshotDigest digest{step, false, 0, {}};
  try {
    if (step == kill_at_) die_while_sealing(image_, layout_);
    if (alter_ && layout_.size[1] > 0) {  // the test hook: other bytes than the other nodes'
      image_[layout_.offset[1]] ^= std::byte{1};
      known[1].reset();
    }
    const Checkpoint::SectionCrcs crcs = Checkpoint::seal(image_, layout_, known);
    own_slots_->commit(step);
    prepare_next(*own_slots_, layout_.total);
    digest = {step, true, layout_.size[1] + layout_.size[2] + layout_.size[3], {meta_crc, crcs[1], crcs[2], crcs[3]}};
  } catch (const std::exception& e) {  // the rename failed: this one is lost, training goes on
    own_slots_->abandon();
    warn_(fmt::format("snapshot at step {} not written ({}); the previous one stays", step, e.what()));
  }
  std::lock_guard lock(mutex_);
  writing_ = false;
  stats_.bytes = static_cast<std::int64_t>(layout_.total);
  (digest.held ? stats_.written : stats_.failed) += 1;
  if (exchanges_) record_own_digest(digest);
}

void SnapshotWriter::prepare_next(SnapshotSlots& slots, std::size_t bytes) noexcept {
  try {
    slots.prepare(bytes);
  } catch (const std::exception&) {
  }
}

SnapshotWriter::Stats SnapshotWriter::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

Json SnapshotWriter::stats_json() const { return stats().to_json(root_, copy_on_thread_); }

}  // namespace ringtrain
