// The stall watchdog thread: compares the current wait's start with the clock every poll
// and drives the side channel; it never calls MPI, so it works whatever the MPI thread
// level and while every other thread is blocked inside MPI.
#include "collectives/StallWatchdog.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

namespace ringtrain {

double StallOptions::effective_poll() const {
  double shortest = 0.0;
  for (double t : {warning_s, timeout_s})
    if (t > 0.0) shortest = shortest > 0.0 ? std::min(shortest, t) : t;
  return shortest > 0.0 ? std::min(poll_s, std::max(0.1, shortest / 8.0)) : poll_s;
}

double StallOptions::silence() const { return std::max(4.0 * effective_poll(), 1.5); }

StallWatchdog::StallWatchdog(StallOptions options, Report warn, Report fatal, StallChannel* channel)
    : options_(options), warn_(std::move(warn)), fatal_(std::move(fatal)), channel_(channel) {
  validate_stall_options(options_);
  options_.poll_s = options_.effective_poll();
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
  if (s.phase[0] != '\0') where += fmt::format(" ({})", s.phase);
  if (s.bucket >= 0) where += fmt::format(", bucket {} of {}", s.bucket + 1, s.buckets);
  const std::string peer =
      s.peer == StallRecord::kAllRanks ? std::string("every rank") : fmt::format("rank {}", s.peer);
  return fmt::format("{}, in {} ({}), waiting for {}", where, s.operation, s.what, peer);
}

std::string StallWatchdog::culprits(const std::vector<StalledRank>& named, const StallRecord::Snapshot& s,
                                    bool channel, const std::vector<int>& exited) {
  if (!named.empty()) return describe_stalled(named);
  if (!exited.empty()) {
    std::string ranks;
    for (int r : exited) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    return fmt::format("none identified: rank(s) {} have exited (the job is ending)", ranks);
  }
  if (channel) return "none identified: every rank reports progress or waits here too (an MPI or network fault?)";
  return s.peer == StallRecord::kAllRanks ? std::string("a rank that never reached it (stopped, hung or unreachable)")
                                          : fmt::format("rank {} (stopped, hung or unreachable)", s.peer);
}

std::pair<std::vector<StalledRank>, std::vector<int>> StallWatchdog::judge(const StallStatus& mine,
                                                                          std::chrono::steady_clock::time_point now) const {
  StallVerdictInput in = channel_->view(mine, now, options_.silence());
  in.slack_s = 2.0 * options_.poll_s;
  std::vector<int> exited;
  for (const PeerView& p : in.peers)
    if (p.exited) exited.push_back(p.rank);
  return {find_stalled(in), exited};
}

void StallWatchdog::run() {
  using Clock = std::chrono::steady_clock;
  const auto poll = std::chrono::duration<double>(options_.poll_s);
  const double silence = options_.silence();
  const bool channel = channel_ != nullptr && channel_->active();
  std::uint64_t warned_serial = 0;
  bool warned = false;
  // A poll far later than asked means this process was itself stopped (SIGSTOP, a frozen
  // VM) or starved: its peers did not stall during that gap, so a wait is measured from
  // the end of the gap at the earliest. Without this, a rank resumed after a stop would
  // blame the very peers that waited for it.
  const auto gap = poll * 3 + std::chrono::seconds(1);
  auto last_poll = Clock::now();
  auto awake_since = last_poll;
  // When this rank's record last changed (a wait begun or ended): how long it stood still.
  std::uint64_t seen_serial = 0;
  bool seen_waiting = false;
  auto changed_at = last_poll;
  // The ranks first found holding up the current wait stay the ones named for it: a stopped
  // rank that mpirun's teardown resumes (SIGCONT) held the job all the same.
  std::uint64_t named_serial = 0;
  std::vector<StalledRank> named;
  std::vector<int> exited;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, poll, [this] { return stop_; })) {
    const auto now = Clock::now();
    if (now - last_poll > gap) awake_since = now;
    last_poll = now;
    const StallRecord::Snapshot s = StallRecord::instance().snapshot();
    if (s.serial != seen_serial || s.waiting != seen_waiting) {
      seen_serial = s.serial;
      seen_waiting = s.waiting;
      changed_at = now;
    }
    const double stalled = s.waiting ? std::chrono::duration<double>(now - std::max(s.since, awake_since)).count() : 0.0;
    const StallStatus mine =
        StallStatus::from(s, stalled, std::chrono::duration<double>(now - std::max(changed_at, awake_since)).count());
    if (channel) channel_->exchange(mine, now, 2.0 * options_.poll_s);
    if (!s.waiting) continue;
    if (s.serial != named_serial) {
      named_serial = s.serial;
      named.clear();
    }
    if (channel && !named.empty()) {
      // The same ranks, with today's figures, every poll: the last ones stay once the job
      // ends around this rank (a stopped rank killed by mpirun's teardown is judged no more).
      for (const StalledRank& now_named : judge(mine, now).first)
        for (StalledRank& r : named)
          if (r.rank == now_named.rank) r = now_named;
    } else if (channel && stalled >= std::min(silence, options_.warning_s > 0 ? options_.warning_s : silence)) {
      std::tie(named, exited) = judge(mine, now);
    }
    const bool timeout = options_.timeout_s > 0.0 && stalled >= options_.timeout_s;
    const bool warning =
        options_.warning_s > 0.0 && stalled >= options_.warning_s && !(warned && warned_serial == s.serial);
    if (!timeout && !warning) continue;
    // A stopped rank's silence shows a few polls after the wait began: give it that long
    // before saying nobody can be named.
    const double threshold = timeout ? options_.timeout_s : options_.warning_s;
    if (channel && named.empty() && stalled < threshold + silence + 2.0 * options_.poll_s) continue;
    const std::string who = culprits(named, s, channel, exited);
    if (timeout) {
      fatal_(fmt::format("stall timeout: no progress for {}; stalled rank(s): {}; ending the job (--stall-timeout {:g})",
                         describe(s, stalled), who, options_.timeout_s));
      return;  // fatal_ ends the process; if it returned, watch no more
    }
    warned = true;
    warned_serial = s.serial;
    warn_(fmt::format("stalled for {}; stalled rank(s): {} (--stall-warning {:g}{})", describe(s, stalled), who,
                      options_.warning_s,
                      options_.timeout_s > 0.0 ? fmt::format(", the job ends after --stall-timeout {:g}", options_.timeout_s)
                                               : std::string()));
  }
}

std::unique_ptr<StallChannel> open_stall_channel(Communicator& comm, const StallOptions& options) {
  if (comm.size() == 1 || (options.warning_s <= 0.0 && options.timeout_s <= 0.0)) return nullptr;
  return std::make_unique<StallChannel>(comm, StallChannelOptions{options.channel});
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
