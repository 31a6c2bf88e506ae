// What this process is blocked on right now, for the stall watchdog (StallWatchdog.h): the
// collectives write it around every blocking MPI wait (which operation, which peer, since
// when), the trainer adds its context (step, bucket) with one call, and the watchdog
// thread reads it about once a second. Every field is a relaxed atomic: a wait costs one
// clock read (the one its timing takes anyway) and a few stores, no lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ringtrain {

class StallRecord {
 public:
  static constexpr int kAllRanks = -1;  // a collective over every rank: no single peer

  // The one record of this process (waits on any thread write it; with the trainer's
  // communication thread that is the thread doing the MPI calls).
  static StallRecord& instance() noexcept;

  // The operation the next waits belong to ("ring all-reduce", "metrics sum", ...): a
  // string with static storage duration.
  void set_operation(const char* operation) noexcept { operation_.store(operation, std::memory_order_relaxed); }
  // What the run is doing ("training", "evaluation", "checkpoint", ...): static text, set
  // by the run around its parts, so a stall names the part a rank was last seen in.
  void set_phase(const char* phase) noexcept { phase_.store(phase, std::memory_order_relaxed); }
  const char* phase() const noexcept { return phase_.load(std::memory_order_relaxed); }
  // The trainer's position: the step being run (1-based global step) and the gradient
  // bucket being reduced (-1 outside the gradient all-reduce).
  void set_step(std::int64_t step) noexcept { step_.store(step, std::memory_order_relaxed); }
  void set_bucket(int bucket, int buckets) noexcept {
    bucket_.store(bucket, std::memory_order_relaxed);
    buckets_.store(buckets, std::memory_order_relaxed);
  }

  // A blocking wait begins at `start` (steady clock): `what` ("receive", "MPI_Allreduce")
  // is static text, peer a rank or kAllRanks. end_wait() marks it over.
  void begin_wait(const char* what, int peer, std::chrono::steady_clock::time_point start) noexcept {
    what_.store(what, std::memory_order_relaxed);
    peer_.store(peer, std::memory_order_relaxed);
    serial_.fetch_add(1, std::memory_order_relaxed);
    since_ns_.store(start.time_since_epoch().count(), std::memory_order_release);
  }
  void end_wait() noexcept { since_ns_.store(0, std::memory_order_release); }

  struct Snapshot {
    bool waiting = false;
    std::chrono::steady_clock::time_point since;
    std::uint64_t serial = 0;  // changes with every wait: one warning per stall
    const char* phase = "";
    const char* operation = "";
    const char* what = "";
    int peer = kAllRanks;
    std::int64_t step = 0;
    int bucket = -1;
    int buckets = 0;
  };
  Snapshot snapshot() const noexcept;

 private:
  std::atomic<std::int64_t> since_ns_{0};  // steady-clock ticks; 0: not waiting
  std::atomic<std::uint64_t> serial_{0};
  std::atomic<const char*> phase_{"start"};
  std::atomic<const char*> operation_{""};
  std::atomic<const char*> what_{""};
  std::atomic<int> peer_{kAllRanks};
  std::atomic<std::int64_t> step_{0};
  std::atomic<int> bucket_{-1};
  std::atomic<int> buckets_{0};
};

// Sets the phase for a scope and puts the previous one back at its end (a checkpoint
// inside an epoch's end returns to "training").
class StallPhase {
 public:
  explicit StallPhase(const char* phase) noexcept : previous_(StallRecord::instance().phase()) {
    StallRecord::instance().set_phase(phase);
  }
  ~StallPhase() { StallRecord::instance().set_phase(previous_); }
  StallPhase(const StallPhase&) = delete;
  StallPhase& operator=(const StallPhase&) = delete;

 private:
  const char* previous_;
};

// Marks a blocking MPI call (a collective inside Open MPI) as a wait for its duration.
class StallWaitScope {
 public:
  StallWaitScope(const char* what, int peer) noexcept {
    StallRecord::instance().begin_wait(what, peer, std::chrono::steady_clock::now());
  }
  ~StallWaitScope() { StallRecord::instance().end_wait(); }
  StallWaitScope(const StallWaitScope&) = delete;
  StallWaitScope& operator=(const StallWaitScope&) = delete;
};

}  // namespace ringtrain
