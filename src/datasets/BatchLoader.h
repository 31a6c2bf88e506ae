// Loader threads: batches of a Dataset produced ahead of the step that needs them, in a
// bounded queue. Threads claim samples (not whole batches) from the oldest unfinished batch,
// so one batch is spread over every thread and the next ones fill while the step computes.
// A sample's floats depend only on (dataset, index, augment key) (Dataset::get_augmented),
// so the bits never depend on the thread count or on which thread made them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "datasets/Dataset.h"

namespace ringtrain {

// Where a batch sits in training: (epoch, batch number within the epoch).
struct BatchId {
  std::uint64_t epoch = 0;
  std::size_t number = 0;
  friend bool operator==(const BatchId&, const BatchId&) = default;
};

struct BatchRequest {
  BatchId id;
  std::vector<std::size_t> indices;
  std::uint64_t augment_key = 0;
};

struct LoaderStats {
  double busy_seconds = 0.0;  // summed over threads: time spent producing samples
  double wall_seconds = 0.0;  // since construction, times the thread count: the capacity
  std::size_t samples = 0;
};

class BatchLoader {
 public:
  // threads >= 1 workers; at most `prefetch` batches (>= 1) queued or in flight.
  BatchLoader(const Dataset& dataset, int threads, int prefetch);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  int threads() const noexcept { return static_cast<int>(workers_.size()); }
  int prefetch() const noexcept { return prefetch_; }

  // Queues a batch behind the others; false (and nothing queued) when the queue is full.
  bool request(BatchRequest request);
  // The id of the oldest queued batch, if any.
  bool front(BatchId& id) const;
  // Drops every queued batch (a jump: resume, a new epoch's order); samples being made
  // finish into memory nobody reads.
  void clear();
  // Waits for the oldest batch and swaps its floats (N, C, H, W) and labels into src and
  // labels (resized to fit); src's previous buffer is kept for a later request to fill. Rethrows the first error of its samples (by position), after
  // which the loader is cleared. Returns the seconds it waited.
  double take(std::vector<float>& src, std::vector<std::int32_t>& labels);

  LoaderStats stats() const;

 private:
  struct Batch;
  const Dataset& dataset_;
  int prefetch_;
  mutable std::mutex mutex_;
  std::condition_variable work_;
  std::condition_variable done_;
  std::deque<std::shared_ptr<Batch>> queue_;
  std::vector<std::vector<float>> spare_;  // batch buffers take() got back, for request() to reuse
  bool stop_ = false;
  double busy_seconds_ = 0.0;
  std::size_t samples_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::vector<std::thread> workers_;

  void run_worker();
};

// Loader threads by default: the cores this node's ranks leave free, at least 1.
int default_loader_threads(int ranks_on_node);

}  // namespace ringtrain
