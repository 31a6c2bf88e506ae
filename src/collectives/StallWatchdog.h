// The stall watchdog: a thread that looks at the StallRecord every poll. When this rank has
// been blocked in one MPI wait for --stall-warning seconds it reports, once per stall, the
// step, bucket, operation and the peer it waits for, and which ranks hold it up, with their
// hosts and where they were last seen; after --stall-timeout seconds it hands a fatal
// message to the owner, which ends the job. The ranks holding it up come from the side
// channel (StallChannel.h), which the thread also drives: it sends this rank's status every
// poll, so a stopped rank's silence is seen by the others. (After Horovod's stall inspector
// and PyTorch's monitored_barrier: a stopped or hung rank must not hold the job silently
// forever, and the message must say which one it is.)
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collectives/Communicator.h"
#include "collectives/StallChannel.h"
#include "collectives/StallRecord.h"
#include "collectives/StallVerdict.h"

namespace ringtrain {

struct StallOptions {
  double warning_s = 60.0;  // 0: no warning
  double timeout_s = 600.0;  // 0: never end the job
  double poll_s = 1.0;       // at most this between looks at the record (and side-channel news)
  std::string channel = "auto";  // --stall-channel: auto, off, rank 0's address or interface

  // The poll actually used: an eighth of the shorter threshold, within [0.1 s, poll_s],
  // so a short --stall-warning is not late by a whole second.
  double effective_poll() const;
  // A rank not heard from this long is silent (stopped, hung whole or unreachable): four
  // polls and at least 1.5 s, far past a live watchdog thread's scheduling delays.
  double silence() const;
};

class StallWatchdog {
 public:
  using Report = std::function<void(const std::string&)>;

  // Starts the thread (none when both warning and timeout are 0). `warn` gets each
  // warning; `fatal` gets the timeout message and must end the process (the blocked
  // thread is inside MPI and cannot be unwound): the app prints it and exits non-zero,
  // which makes mpirun end every other rank. `channel` (may be null) is driven by the
  // thread from here on and must outlive the watchdog.
  StallWatchdog(StallOptions options, Report warn, Report fatal, StallChannel* channel = nullptr);
  ~StallWatchdog();  // stops and joins the thread
  StallWatchdog(const StallWatchdog&) = delete;
  StallWatchdog& operator=(const StallWatchdog&) = delete;

  // The messages, from a snapshot that has been waiting `stalled_s` seconds.
  static std::string describe(const StallRecord::Snapshot& s, double stalled_s);
  // "rank 1 on node-b [...]" for the ranks named, else what can be said without them.
  // `exited`: ranks whose process has ended, said when nobody is named.
  static std::string culprits(const std::vector<StalledRank>& named, const StallRecord::Snapshot& s, bool channel,
                              const std::vector<int>& exited = {});

 private:
  void run();
  // The side channel's verdict now: the ranks to name, and the ranks whose process ended.
  std::pair<std::vector<StalledRank>, std::vector<int>> judge(const StallStatus& mine,
                                                              std::chrono::steady_clock::time_point now) const;

  StallOptions options_;
  Report warn_;
  Report fatal_;
  StallChannel* channel_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// The side channel for a watchdog with these options: none when the watchdog is off or
// there is one rank (collective over comm either way: every rank decides alike).
std::unique_ptr<StallChannel> open_stall_channel(Communicator& comm, const StallOptions& options);

// Throws std::invalid_argument naming the flag for a negative or non-finite value.
void validate_stall_options(const StallOptions& options);

}  // namespace ringtrain
