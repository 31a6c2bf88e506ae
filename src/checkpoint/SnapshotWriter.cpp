// RAM snapshots: the copy at the step boundary, the snapshot thread, the digests to the
// previous node and the whole copies to the next (SnapshotWriter.h).
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
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "checkpoint/Crc32.h"
#include "checkpoint/SnapshotDigest.h"
#include "checkpoint/SnapshotStore.h"
#include "checkpoint/StreamCopy.h"
#include "collectives/PeerChannel.h"

namespace ringtrain {
namespace {

// Whole snapshots travel to the next node, digests to the previous one (SnapshotWriter.h).
constexpr int kTagSnapshot = 1;    // a serialised snapshot
constexpr int kTagEnd = 2;         // no more snapshots from this sender (finish())
constexpr int kTagDigest = 3;      // a SnapshotDigest of the sender's own snapshot of a step
constexpr int kTagDigestEnd = 4;   // no more digests from this sender (finish())

// This node's own digests kept to compare the next node's with (those come within a
// snapshot or two of their step).
constexpr std::size_t kDigestHistory = 8;


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

// Snapshot files made ready off the step's path (SnapshotSlots::prepare, prepare_all). A
// failure here is not reported: the snapshot's own open() tries again and warns.
void prepare_next(SnapshotSlots& slots, std::size_t bytes) noexcept {
  try {
    slots.prepare(bytes);
  } catch (const std::exception&) {
  }
}

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

bool SnapshotWriter::arm(std::span<const float> params, std::span<const float> optimizer_state,
                         std::size_t buffers_bytes) {
  if (!leader_ || skip_copy_ || copy_on_thread_ || params.empty()) return false;
  if (optimizer_state.size() % params.size() != 0) return false;  // not planes of the parameters' layout
  if (kill_at_ >= 0 || slow_copy_ms_ > 0) wait_idle();            // as in take(): none skipped under a test hook
  wait_for_warm();  // done long before, as a rule: warm() comes K - 1 steps earlier
  {
    std::lock_guard lock(mutex_);
    if (writing_) return false;  // take() skips this one
  }
  try {
    layout_ = Checkpoint::layout(meta_room_, params.size_bytes(), buffers_bytes, optimizer_state.size_bytes());
    image_ = own_slots_->open(layout_.total);
  } catch (const std::exception&) {  // take() tries again and warns
    own_slots_->abandon();
    return false;
  }
  armed_ = true;
  capture_params_ = params;
  capture_state_ = optimizer_state;
  capture_planes_ = optimizer_state.size() / params.size();
  capture_buffers_ = buffers_bytes;
  cursor_ = 0;
  params_crc_ = 0;
  plane_crcs_.assign(capture_planes_, 0);
  return true;
}

void SnapshotWriter::capture(std::size_t offset, std::size_t count) {
  if (!armed_) return;
  if (offset < cursor_ || count > capture_params_.size() - offset) {
    throw std::logic_error(fmt::format("SnapshotWriter::capture: block [{}, {}) after {} of {} floats", offset,
                                       offset + count, cursor_, capture_params_.size()));
  }
  if (offset > cursor_) capture_range(cursor_, offset - cursor_);  // padding: unchanged by the update
  capture_range(offset, count);
  cursor_ = offset + count;
}

void SnapshotWriter::capture_range(std::size_t offset, std::size_t count) {
  const bool crc = !crc_on_thread_ && !skip_crc_;
  const auto put = [&](std::span<const float> from, std::size_t at, std::size_t section, std::uint32_t& sum) {
    const std::span<const std::byte> src = std::as_bytes(from.subspan(at, count));
    stream_copy(image_.data() + layout_.offset[section] + at * sizeof(float), src.data(), src.size());
    if (crc) sum = checkpoint_crc32(src, sum);  // from cache, as the copy
  };
  put(capture_params_, offset, 1, params_crc_);
  const std::size_t n = capture_params_.size();
  for (std::size_t j = 0; j < capture_planes_; ++j) put(capture_state_, j * n + offset, 3, plane_crcs_[j]);
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

void SnapshotWriter::disarm() noexcept {
  if (!armed_) return;
  armed_ = false;
  own_slots_->abandon();
}

bool SnapshotWriter::finish_capture(std::size_t meta_bytes, std::size_t buffers_bytes) {
  if (!armed_) return false;
  armed_ = false;
  // What no block reported since the last one (all of it if the update had no observer:
  // the state after the update either way).
  const std::size_t n = capture_params_.size();
  if (cursor_ < n) capture_range(cursor_, n - cursor_);
  stream_fence();  // before the lock that hands the file to the snapshot thread
  // The bytes went where the armed layout put them: usable while the metadata still fits
  // its room and the buffers their size; else take() starts over with the thread's copy.
  return meta_bytes <= meta_room_ && buffers_bytes == capture_buffers_;
}

Checkpoint::KnownCrcs SnapshotWriter::captured_crcs() const {
  Checkpoint::KnownCrcs known;
  if (crc_on_thread_) return known;
  // The state section is the planes one after another: their CRCs combined.
  std::uint32_t state = capture_planes_ > 0 ? plane_crcs_[0] : 0;
  const std::size_t plane_bytes = capture_params_.size_bytes();
  for (std::size_t j = 1; j < capture_planes_; ++j) state = checkpoint_crc32_combine(state, plane_crcs_[j], plane_bytes);
  known[1] = params_crc_;
  known[3] = state;
  return known;
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

void SnapshotWriter::record_own_digest(const SnapshotDigest& digest) {
  own_digests_.push_back(digest);
  if (own_digests_.size() > kDigestHistory) own_digests_.pop_front();
  digests_out_.push_back(digest);
}

void SnapshotWriter::compare_with_next(const SnapshotDigest& next) {
  std::optional<SnapshotDigest> own;
  {
    std::lock_guard lock(mutex_);
    for (const SnapshotDigest& d : own_digests_) {
      if (d.step == next.step) own = d;
    }
    if (!own || !own->held) return;  // nothing of this node's at that step to replicate
    if (own->same_state(next)) {     // the next node's own snapshot is the copy
      ++stats_.replicated;
      return;
    }
  }
  // The next node holds other bytes, or none of that step: this node's snapshot goes whole
  // (its file is kept until two newer ones are committed, and only this thread commits).
  const std::filesystem::path path = own_slots_->dir() / snapshot_file_name(next.step);
  try {
    std::vector<std::byte> bytes = Checkpoint::read_file(path);
    std::lock_guard lock(mutex_);
    outgoing_.swap(bytes);  // a newer one replaces one not yet sent
  } catch (const std::exception& e) {
    warn_(fmt::format("snapshot at step {} not sent to the next node, whose own differs ({})", next.step, e.what()));
  }
}

void SnapshotWriter::write_received(const std::vector<std::byte>& bytes, int from) {
  const std::filesystem::path dir = snapshot_peer_dir(own_dir(), from);
  bool ok = true;
  try {
    const Json meta = Checkpoint::verify(bytes, (dir / "received").string());  // every CRC
    const std::span<std::byte> file = peer_slots_->open(bytes.size());
    std::memcpy(file.data(), bytes.data(), bytes.size());
    peer_slots_->commit(meta.at("global_step").as_int());
    prepare_next(*peer_slots_, bytes.size());
  } catch (const std::exception& e) {
    ok = false;
    peer_slots_->abandon();
    warn_(fmt::format("copy of node {}'s snapshot not written ({}); the previous one stays", from, e.what()));
  }
  std::lock_guard lock(mutex_);
  (ok ? stats_.received : stats_.failed) += 1;
}

void SnapshotWriter::progress() {
  if (!exchanges_) return;
  progress_digests();
  progress_send();
  progress_receive();
}

void SnapshotWriter::progress_digests() {
  if (!peer_->test(&digest_request_)) return;
  SnapshotDigest digest;
  {
    std::lock_guard lock(mutex_);
    if (digests_out_.empty()) return;
    digest = digests_out_.front();
    digests_out_.pop_front();
  }
  const auto bytes = digest.encode();
  digest_sending_.assign(bytes.begin(), bytes.end());
  digest_request_ = peer_->isend(digest_sending_, previous_leader_, kTagDigest);
}

void SnapshotWriter::progress_send() {
  if (!peer_->test(&send_request_)) return;
  std::lock_guard lock(mutex_);
  if (outgoing_.empty()) return;
  sending_.swap(outgoing_);
  outgoing_.clear();
  send_request_ = peer_->isend(sending_, next_leader_, kTagSnapshot);
  ++stats_.sent;
}

bool SnapshotWriter::receive_small(const PeerChannel::Arrival& arrival) {
  switch (arrival.tag) {
    case kTagEnd:
      peer_->receive(arrival, {});
      end_received_ = true;
      return true;
    case kTagDigestEnd:
      peer_->receive(arrival, {});
      digests_end_received_ = true;
      return true;
    case kTagDigest: {
      std::vector<std::byte> bytes(arrival.bytes);
      peer_->receive(arrival, bytes);
      const SnapshotDigest next = SnapshotDigest::decode(bytes);
      post([this, next] { compare_with_next(next); });  // after this node's own of that step
      return true;
    }
    default:
      return false;
  }
}

void SnapshotWriter::progress_receive() {
  if (receive_request_ != MPI_REQUEST_NULL) {
    if (!peer_->test(&receive_request_)) return;
    // Checked (every CRC) and written on the snapshot thread, which then hands the buffer
    // back for a later copy.
    auto bytes = std::make_shared<std::vector<std::byte>>(std::move(receiving_));
    receiving_ = {};
    const int from = (place_.node + place_.nodes - 1) % place_.nodes;
    post([this, bytes, from] {
      write_received(*bytes, from);
      std::lock_guard lock(mutex_);
      spare_received_.push_back(std::move(*bytes));
    });
  }
  std::optional<PeerChannel::Arrival> arrival;
  do {
    arrival = peer_->probe();
    if (!arrival) return;
  } while (receive_small(*arrival));
  // A whole snapshot. A buffer a received copy was written from, if the snapshot thread is
  // done with one: the copies of a run have one size (SnapshotWriter.h), so after the first
  // two copies no receive allocates or zeroes memory.
  {
    std::lock_guard lock(mutex_);
    if (!spare_received_.empty()) {
      receiving_ = std::move(spare_received_.back());
      spare_received_.pop_back();
    }
  }
  receiving_.resize(arrival->bytes);
  receive_request_ = peer_->ireceive(*arrival, receiving_);
}

bool SnapshotWriter::finish_round() {
  progress_digests();
  bool digests_left = false, copies_left = false;
  {
    std::lock_guard lock(mutex_);
    digests_left = !digests_out_.empty();
    copies_left = !outgoing_.empty() || pending_ > 0;  // a comparison may still ask for one
  }
  if (!digests_left && digest_request_ == MPI_REQUEST_NULL && !digests_end_sent_) {
    digest_request_ = peer_->isend({}, previous_leader_, kTagDigestEnd);
    digests_end_sent_ = true;
  }
  progress_send();
  // Every whole copy the next node's digests call for is known once they have ended (they
  // come in order, before their end) and the snapshot thread has compared them all.
  if (digests_end_received_ && !copies_left && send_request_ == MPI_REQUEST_NULL && !end_sent_) {
    send_request_ = peer_->isend({}, next_leader_, kTagEnd);
    end_sent_ = true;
  }
  if (!end_received_ || !digests_end_received_ || receive_request_ != MPI_REQUEST_NULL) progress_receive();
  return digests_end_sent_ && peer_->test(&digest_request_) && end_sent_ && peer_->test(&send_request_) &&
         end_received_ && digests_end_received_ && receive_request_ == MPI_REQUEST_NULL;
}

void SnapshotWriter::finish() {
  wait_idle();  // every own snapshot written, its digest queued
  if (!exchanges_) return;
  for (int idle = 0; !finish_round(); ++idle) PeerChannel::back_off(idle);
  wait_idle();  // the copies received written
}

SnapshotWriter::Stats SnapshotWriter::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

Json SnapshotWriter::stats_json() const {
  const Stats s = stats();
  Json j = Json::object();
  j.set("dir", root_.string());
  j.set("written", s.written);
  j.set("skipped", s.skipped);
  j.set("failed", s.failed);
  j.set("replicated_on_next_node", s.replicated);
  j.set("sent_to_next_node", s.sent);
  j.set("received_from_previous_node", s.received);
  j.set("bytes", s.bytes);
  j.set("thread_cpu_s", s.thread_cpu_seconds);
  j.set("captured_in_update", s.captured);
  j.set("copy", copy_on_thread_ ? "thread" : "update");  // where the state is copied (copy_on_thread())
  j.set("fence_waits", s.fence_waits);
  j.set("fence_wait_s", s.fence_wait_seconds);
  return j;
}

}  // namespace ringtrain
