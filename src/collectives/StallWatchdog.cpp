// The stall watchdog thread: compares the current wait's start with the clock once per
// poll; it never calls MPI, so it works whatever the MPI thread level and while every
// other thread is blocked inside MPI.
#include "collectives/StallWatchdog.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {

StallWatchdog::StallWatchdog(StallOptions options, Report warn, Report fatal)
    : options_(options), warn_(std::move(warn)), fatal_(std::move(fatal)) {
  validate_stall_options(options_);
  if (options_.warning_s > 0.0 || options_.timeout_s > 0.0) thread_ = std::thread([this] { run(); });
}

StallWatchdog::~StallWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string StallWatchdog::describe(const StallRecord::Snapshot& s, double stalled_s) {
  std::string where = fmt::format("{:.0f} s", stalled_s);
  if (s.step > 0) where += fmt::format(" at step {}", s.step);
  if (s.bucket >= 0) where += fmt::format(", bucket {} of {}", s.bucket + 1, s.buckets);
  const std::string peer =
      s.peer == StallRecord::kAllRanks ? std::string("every rank") : fmt::format("rank {}", s.peer);
  return fmt::format("{}, in {} ({}), waiting for {}", where, s.operation, s.what, peer);
}

void StallWatchdog::run() {
  using Clock = std::chrono::steady_clock;
  const auto poll = std::chrono::duration<double>(options_.poll_s);
  std::uint64_t warned_serial = 0;
  bool warned = false;
  // A poll far later than asked means this process was itself stopped (SIGSTOP, a frozen
  // VM) or starved: its peers did not stall during that gap, so a wait is measured from
  // the end of the gap at the earliest. Without this, a rank resumed after a stop would
  // blame the very peers that waited for it.
  const auto gap = poll * 3 + std::chrono::seconds(1);
  auto last_poll = Clock::now();
  auto awake_since = last_poll;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, poll, [this] { return stop_; })) {
    const auto now = Clock::now();
    if (now - last_poll > gap) awake_since = now;
    last_poll = now;
    const StallRecord::Snapshot s = StallRecord::instance().snapshot();
    if (!s.waiting) continue;
    const double stalled = std::chrono::duration<double>(now - std::max(s.since, awake_since)).count();
    if (options_.timeout_s > 0.0 && stalled >= options_.timeout_s) {
      const std::string culprit =
          s.peer == StallRecord::kAllRanks ? std::string("a rank that never reached it") : fmt::format("rank {}", s.peer);
      fatal_(fmt::format("stall timeout: no progress for {}; stalled rank: {} (stopped, hung or unreachable); "
                         "ending the job (--stall-timeout {:g})",
                         describe(s, stalled), culprit, options_.timeout_s));
      return;  // fatal_ ends the process; if it returned, watch no more
    }
    if (options_.warning_s > 0.0 && stalled >= options_.warning_s && !(warned && warned_serial == s.serial)) {
      warned = true;
      warned_serial = s.serial;
      warn_(fmt::format("stalled for {} (--stall-warning {:g}{})", describe(s, stalled), options_.warning_s,
                        options_.timeout_s > 0.0 ? fmt::format(", the job ends after --stall-timeout {:g}", options_.timeout_s)
                                                 : std::string()));
    }
  }
}

void validate_stall_options(const StallOptions& options) {
  if (!(std::isfinite(options.warning_s) && options.warning_s >= 0.0))
    throw std::invalid_argument(fmt::format("--stall-warning must be >= 0 seconds (got {})", options.warning_s));
  if (!(std::isfinite(options.timeout_s) && options.timeout_s >= 0.0))
    throw std::invalid_argument(fmt::format("--stall-timeout must be >= 0 seconds (got {})", options.timeout_s));
  if (!(std::isfinite(options.poll_s) && options.poll_s > 0.0))
    throw std::invalid_argument(fmt::format("stall watchdog: poll interval must be > 0 (got {})", options.poll_s));
}

}  // namespace ringtrain
