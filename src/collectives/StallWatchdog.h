// The stall watchdog: a thread that looks at the StallRecord about once a second. When this
// rank has been blocked in one MPI wait for --stall-warning seconds it reports, once per
// stall, the step, bucket, operation and the peer it waits for; after --stall-timeout
// seconds it hands a fatal message to the owner, which ends the job. (After Horovod's stall
// inspector and PyTorch's monitored_barrier: a stopped or hung rank must not hold the job
// silently forever.)
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "collectives/StallRecord.h"

namespace ringtrain {

struct StallOptions {
  double warning_s = 60.0;  // 0: no warning
  double timeout_s = 600.0;  // 0: never end the job
  double poll_s = 1.0;       // how often the record is looked at
};

class StallWatchdog {
 public:
  using Report = std::function<void(const std::string&)>;

  // Starts the thread (none when both warning and timeout are 0). `warn` gets each
  // warning; `fatal` gets the timeout message and must end the process (the blocked
  // thread is inside MPI and cannot be unwound): the app prints it and exits non-zero,
  // which makes mpirun end every other rank.
  StallWatchdog(StallOptions options, Report warn, Report fatal);
  ~StallWatchdog();  // stops and joins the thread
  StallWatchdog(const StallWatchdog&) = delete;
  StallWatchdog& operator=(const StallWatchdog&) = delete;

  // The messages, from a snapshot that has been waiting `stalled_s` seconds.
  static std::string describe(const StallRecord::Snapshot& s, double stalled_s);

 private:
  void run();

  StallOptions options_;
  Report warn_;
  Report fatal_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// Throws std::invalid_argument naming the flag for a negative or non-finite value.
void validate_stall_options(const StallOptions& options);

}  // namespace ringtrain
