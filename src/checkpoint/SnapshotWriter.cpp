// RAM snapshots: the copy at the step boundary, the snapshot thread, the copies to the next
// node (SnapshotWriter.h).
#include "checkpoint/SnapshotWriter.h"

#include <pthread.h>
#include <sched.h>

#include <ctime>
#include <utility>

#include <fmt/format.h>

#include "checkpoint/SnapshotStore.h"
#include "collectives/PeerChannel.h"

namespace ringtrain {
namespace {

constexpr int kTagSnapshot = 1;  // a serialised snapshot
constexpr int kTagEnd = 2;       // no more snapshots from this sender (finish())


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

}  // namespace

double SnapshotWriter::thread_cpu_seconds() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

SnapshotWriter::SnapshotWriter(Communicator& comm, std::filesystem::path root, int keep,
                               std::function<void(const std::string&)> warn)
    : comm_(comm), root_(std::move(root)), keep_(keep), warn_(std::move(warn)), place_(comm.node_place()) {
  leader_ = place_.leader_of(place_.node) == comm.rank();
  // The channel's communicator is made (and freed) by every rank, as MPI wants; the
  // leaders use it.
  if (place_.nodes > 1) {
    peer_ = std::make_unique<PeerChannel>(comm);
    exchanges_ = leader_;
    next_leader_ = place_.leader_of((place_.node + 1) % place_.nodes);
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
}

std::filesystem::path SnapshotWriter::own_dir() const { return snapshot_node_dir(root_, place_.node, place_.nodes); }

void SnapshotWriter::post(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back(std::move(task));
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

bool SnapshotWriter::take(std::int64_t step, std::span<const float> params, std::span<const float> buffers,
                          std::span<const float> optimizer_state, Json meta) {
  {
    std::lock_guard lock(mutex_);
    if (writing_) {
      ++stats_.skipped;
      return false;
    }
  }
  // The snapshot thread leaves slot_ alone until writing_ is set again; assign() reuses
  // the vectors' memory, so after the first snapshot this is a copy and no allocation.
  slot_.params.assign(params.begin(), params.end());
  slot_.buffers.assign(buffers.begin(), buffers.end());
  slot_.optimizer_state.assign(optimizer_state.begin(), optimizer_state.end());
  slot_.meta = std::move(meta);
  {
    std::lock_guard lock(mutex_);
    writing_ = true;
  }
  post([this, step] { write_own(step); });
  return true;
}

void SnapshotWriter::write_own(std::int64_t step) {
  bool ok = true;
  try {
    Checkpoint::serialize_into(slot_, image_);  // image_ keeps its memory from one snapshot to the next
    write_snapshot(own_dir(), step, image_, keep_);
  } catch (const std::exception& e) {  // out of memory or space: this one is lost, training goes on
    ok = false;
    image_.clear();
    warn_(fmt::format("snapshot at step {} not written ({}); the previous one stays", step, e.what()));
  }
  std::lock_guard lock(mutex_);
  writing_ = false;
  stats_.bytes = static_cast<std::int64_t>(image_.size());
  (ok ? stats_.written : stats_.failed) += 1;
  // A newer one replaces one not yet sent; outgoing_ and sending_ trade their buffers, so
  // this copy lands in memory used before.
  if (exchanges_ && !image_.empty()) outgoing_.assign(image_.begin(), image_.end());
}

void SnapshotWriter::progress() {
  if (!exchanges_) return;
  progress_send();
  progress_receive();
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

void SnapshotWriter::progress_receive() {
  if (receive_request_ != MPI_REQUEST_NULL) {
    if (!peer_->test(&receive_request_)) return;
    // Checked (every CRC) and written on the snapshot thread.
    auto bytes = std::make_shared<std::vector<std::byte>>(std::move(receiving_));
    receiving_ = {};
    const int from = (place_.node + place_.nodes - 1) % place_.nodes;
    post([this, bytes, from] {
      const std::filesystem::path dir = snapshot_peer_dir(own_dir(), from);
      bool ok = true;
      try {
        const CheckpointData data = Checkpoint::deserialize(*bytes, (dir / "received").string());
        write_snapshot(dir, data.meta.at("global_step").as_int(), *bytes, keep_);
      } catch (const std::exception& e) {
        ok = false;
        warn_(fmt::format("copy of node {}'s snapshot not written ({}); the previous one stays", from, e.what()));
      }
      std::lock_guard lock(mutex_);
      (ok ? stats_.received : stats_.failed) += 1;
    });
  }
  const auto arrival = peer_->probe();
  if (!arrival) return;
  if (arrival->tag == kTagEnd) {
    peer_->receive(*arrival, {});
    end_received_ = true;
    return;
  }
  receiving_.resize(arrival->bytes);
  receive_request_ = peer_->ireceive(*arrival, receiving_);
}

void SnapshotWriter::finish() {
  wait_idle();  // every own snapshot written, the newest in outgoing_
  if (!exchanges_) return;
  for (int idle = 0;; ++idle) {
    progress_send();
    bool nothing_left = false;
    {
      std::lock_guard lock(mutex_);
      nothing_left = outgoing_.empty() && send_request_ == MPI_REQUEST_NULL;
    }
    if (nothing_left && !end_sent_) {
      send_request_ = peer_->isend({}, next_leader_, kTagEnd);
      end_sent_ = true;
    }
    if (!end_received_ || receive_request_ != MPI_REQUEST_NULL) progress_receive();
    if (end_sent_ && peer_->test(&send_request_) && end_received_ && receive_request_ == MPI_REQUEST_NULL) break;
    PeerChannel::back_off(idle);
  }
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
  j.set("sent_to_next_node", s.sent);
  j.set("received_from_previous_node", s.received);
  j.set("bytes", s.bytes);
  j.set("thread_cpu_s", s.thread_cpu_seconds);
  return j;
}

}  // namespace ringtrain
