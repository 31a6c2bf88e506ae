// One thread that runs posted tasks in order: the communication thread that owns every MPI
// call of an overlapped training step (MPI_THREAD_SERIALIZED: the caller makes no MPI call
// between post() and the wait_idle() that follows).
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace ringtrain {

class CommThread {
 public:
  CommThread();
  // Runs what is still queued, then joins.
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  void post(std::function<void()> task);

  // Blocks until every posted task has run. If a task threw, the tasks after it were
  // dropped and the first exception is rethrown here (once).
  void wait_idle();

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable work_;  // tasks_ grew, or stopping_
  std::condition_variable idle_;  // pending_ reached 0
  std::deque<std::function<void()>> tasks_;
  int pending_ = 0;  // posted and not yet finished
  bool stopping_ = false;
  std::exception_ptr error_;
  // Last member: started once the state above exists, joined before it goes.
  std::thread thread_;
};

}  // namespace ringtrain
