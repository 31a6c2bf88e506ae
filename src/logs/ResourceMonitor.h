// Samples this process's CPU use and memory from /proc, as psrecord does, so every rank
// logs its own resource curve without an external tool.
#pragma once

#include <chrono>
#include <cstdint>

namespace ringtrain {

struct ResourceSample {
  double cpu_percent = 0.0;  // over the interval since the previous sample; 100 = one core
  double rss_mb = 0.0;       // VmRSS
  double peak_rss_mb = 0.0;  // VmHWM
};

class ResourceMonitor {
 public:
  ResourceMonitor();
  // A sample covering the time since the previous call (or construction).
  ResourceSample sample();
  // Mean CPU% since construction.
  double mean_cpu_percent() const;
  double peak_rss_mb() const noexcept { return peak_rss_mb_; }

  // Process CPU seconds (user + system) so far; 0 if /proc is unavailable.
  static double process_cpu_seconds();
  // {VmRSS, VmHWM} in MB; zeros if /proc is unavailable.
  static std::pair<double, double> memory_mb();

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_wall_;
  Clock::time_point last_wall_;
  double start_cpu_ = 0.0;
  double last_cpu_ = 0.0;
  double peak_rss_mb_ = 0.0;
};

}  // namespace ringtrain
