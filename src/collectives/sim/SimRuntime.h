// Virtual ranks in one process: a deterministic cooperative scheduler runs one fiber per
// rank (ucontext), and the MPI calls of the real all-reduce code (SimMpi.cpp: the subset
// MpiCommunicator and the algorithms use) move their messages through in-memory queues and
// record what each rank does into a Schedule. A rank runs until it waits for something
// that has not happened; then the next ready rank runs. One runtime at a time, one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "collectives/sim/Schedule.h"

namespace ringtrain::sim {

class SimRuntime {
 public:
  // ranks_per_node: what MPI_COMM_TYPE_SHARED groups (rank / ranks_per_node).
  SimRuntime(int ranks, int ranks_per_node);
  ~SimRuntime();
  SimRuntime(const SimRuntime&) = delete;
  SimRuntime& operator=(const SimRuntime&) = delete;

  // Runs body(rank) on every rank to completion. Throws the first rank's exception, or
  // std::runtime_error when every unfinished rank waits (a deadlock).
  void run(const std::function<void(int rank)>& body);

  // The runtime in use (throws std::logic_error when there is none).
  static SimRuntime& current();
  int rank() const { return running_; }
  int ranks() const { return ranks_; }
  int ranks_per_node() const { return ranks_per_node_; }
  // Different for every runtime of the process (one at the same address as an earlier one
  // included), so the simulated MPI knows when to start afresh.
  std::uint64_t generation() const { return generation_; }

  // The calling rank records its operations from now on / stops.
  void set_recording(bool on) { recording_[static_cast<std::size_t>(running_)] = on; }
  bool recording() const { return running_ >= 0 && recording_[static_cast<std::size_t>(running_)]; }
  void record(const Op& op);
  Schedule& schedule() { return schedule_; }

  // The calling rank sleeps until wake(token) names its token (a request, a collective,
  // a counter's address), then returns; the caller re-checks its condition.
  void block_on(const void* token);
  void wake(const void* token);

  // A new request id of the given kind; records nothing.
  std::uint64_t new_request(RequestRef::Kind kind, std::uint64_t index);

  // SharedCounter: the last signal stored to `word` (kNoRequest: none yet), and a store.
  std::uint64_t last_signal(const void* word) const;
  std::uint64_t signal(const void* word);

 private:
  struct Fiber;
  static void fiber_entry();
  void switch_to(int rank);

  int ranks_;
  int ranks_per_node_;
  std::uint64_t generation_ = 0;
  int running_ = -1;
  std::vector<std::unique_ptr<Fiber>> fibers_;
  std::deque<int> ready_;
  std::unordered_map<const void*, std::vector<int>> sleepers_;
  std::unordered_map<const void*, std::uint64_t> signals_;
  std::vector<bool> recording_;
  const std::function<void(int)>* body_ = nullptr;
  std::exception_ptr error_;
  Schedule schedule_;
  struct MainContext;
  std::unique_ptr<MainContext> main_;
};

}  // namespace ringtrain::sim
