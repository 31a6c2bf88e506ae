// The communication thread's queue.
#include "overlap/CommThread.h"

#include <utility>

namespace ringtrain {

CommThread::CommThread() : thread_([this] { loop(); }) {}

CommThread::~CommThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_.notify_one();
  thread_.join();
}

void CommThread::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
    ++pending_;
  }
  work_.notify_one();
}

void CommThread::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return pending_ == 0; });
  if (error_) {
    std::exception_ptr e = std::exchange(error_, nullptr);
    lock.unlock();
    std::rethrow_exception(e);
  }
}

void CommThread::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, nothing left
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    // After a failure the communicator's state is unknown: the remaining operations of
    // the step are dropped and the error goes to the next wait_idle().
    const bool skip = error_ != nullptr;
    lock.unlock();
    std::exception_ptr failed;
    if (!skip) {
      try {
        task();
      } catch (...) {
        failed = std::current_exception();
      }
    }
    lock.lock();
    if (failed && !error_) error_ = failed;
    if (--pending_ == 0) idle_.notify_all();
  }
}

}  // namespace ringtrain
