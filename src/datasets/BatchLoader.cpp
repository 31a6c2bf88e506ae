// BatchLoader: a mutex-guarded queue of batches; workers claim runs of samples from the
// oldest batch with samples left, write them in place, and the last one signals the taker.
#include "datasets/BatchLoader.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {

struct BatchLoader::Batch {
  BatchRequest request;
  std::vector<float> src;
  std::vector<std::int32_t> labels;
  std::size_t claimed = 0;  // samples handed to workers
  std::size_t done = 0;     // samples finished
  std::size_t error_at = SIZE_MAX;
  std::exception_ptr error;
};

BatchLoader::BatchLoader(const Dataset& dataset, int threads, int prefetch)
    : dataset_(dataset), prefetch_(prefetch), start_(std::chrono::steady_clock::now()) {
  if (threads < 1) throw std::invalid_argument(fmt::format("--loader-threads: expected at least 1, got {}", threads));
  if (prefetch < 1) throw std::invalid_argument(fmt::format("--prefetch: expected at least 1, got {}", prefetch));
  for (int t = 0; t < threads; ++t) workers_.emplace_back([this] { run_worker(); });
}

BatchLoader::~BatchLoader() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  work_.notify_all();
  for (auto& w : workers_) w.join();
}

bool BatchLoader::request(BatchRequest request) {
  const std::size_t n = request.indices.size();
  for (std::size_t i : request.indices)
    if (i >= dataset_.size())
      throw std::out_of_range(fmt::format("BatchLoader: index {} out of range (dataset size {})", i, dataset_.size()));
  // A full queue is refused before anything is allocated (callers fill the queue by asking
  // until refused, once a step), and a batch's floats come from a buffer a take handed
  // back: at 224 a batch of 64 is 38 MB, whose fresh pages cost the requesting (compute)
  // thread more to fault in and zero than a loader thread spends on several images.
  auto batch = std::make_shared<Batch>();
  {
    const std::lock_guard lock(mutex_);
    if (queue_.size() >= static_cast<std::size_t>(prefetch_)) return false;
    if (!spare_.empty()) {
      batch->src.swap(spare_.back());
      spare_.pop_back();
    }
  }
  batch->src.resize(n * dataset_.shape().numel());
  batch->labels.resize(n);
  batch->request = std::move(request);
  {
    const std::lock_guard lock(mutex_);
    if (queue_.size() >= static_cast<std::size_t>(prefetch_)) {  // another thread requested meanwhile
      spare_.push_back(std::move(batch->src));
      return false;
    }
    queue_.push_back(std::move(batch));
  }
  work_.notify_all();
  return true;
}

bool BatchLoader::front(BatchId& id) const {
  const std::lock_guard lock(mutex_);
  if (queue_.empty()) return false;
  id = queue_.front()->request.id;
  return true;
}

void BatchLoader::clear() {
  const std::lock_guard lock(mutex_);
  queue_.clear();  // workers hold their batch's shared_ptr until their samples are written
}

double BatchLoader::take(std::vector<float>& src, std::vector<std::int32_t>& labels) {
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<Batch> batch;
  {
    std::unique_lock lock(mutex_);
    if (queue_.empty()) throw std::logic_error("BatchLoader::take: nothing requested");
    batch = queue_.front();
    done_.wait(lock, [&] { return batch->done == batch->request.indices.size(); });
    queue_.pop_front();
    if (batch->error) queue_.clear();
  }
  if (batch->error) std::rethrow_exception(batch->error);
  src.swap(batch->src);
  labels.swap(batch->labels);
  if (batch->src.capacity() > 0) {  // the caller's previous floats: the next request's buffer
    const std::lock_guard lock(mutex_);
    if (spare_.size() < static_cast<std::size_t>(prefetch_)) spare_.push_back(std::move(batch->src));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void BatchLoader::run_worker() {
  const std::size_t numel = dataset_.shape().numel();
  std::unique_lock lock(mutex_);
  for (;;) {
    std::shared_ptr<Batch> batch;
    work_.wait(lock, [&] {
      if (stop_) return true;
      for (const auto& b : queue_)
        if (b->claimed < b->request.indices.size()) return (batch = b), true;
      return false;
    });
    if (stop_) return;
    // A run of samples per claim: enough to make the lock's cost small against 28x28
    // images, few enough that every thread gets a share of one batch.
    const std::size_t n = batch->request.indices.size();
    const std::size_t run = std::max<std::size_t>(1, n / (4 * workers_.size()));
    const std::size_t first = batch->claimed, last = std::min(n, first + run);
    batch->claimed = last;
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    std::exception_ptr error;
    std::size_t error_at = SIZE_MAX;
    for (std::size_t k = first; k < last && !error; ++k) {
      try {
        const std::size_t i = batch->request.indices[k];
        dataset_.get_augmented(i, batch->src.data() + k * numel, batch->request.augment_key);
        batch->labels[k] = dataset_.label(i);
      } catch (...) {
        error = std::current_exception();
        error_at = k;
      }
    }
    const double busy = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    lock.lock();
    busy_seconds_ += busy;
    samples_ += last - first;
    if (error && error_at < batch->error_at) {  // the first failing sample's error, whichever thread
      batch->error = error;
      batch->error_at = error_at;
    }
    batch->done += last - first;
    if (batch->done == n) done_.notify_all();
  }
}

LoaderStats BatchLoader::stats() const {
  const std::lock_guard lock(mutex_);
  LoaderStats s;
  s.busy_seconds = busy_seconds_;
  s.samples = samples_;
  s.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() *
                   static_cast<double>(workers_.size());
  return s;
}

int default_loader_threads(int ranks_on_node) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores - std::max(1, ranks_on_node));
}

}  // namespace ringtrain
