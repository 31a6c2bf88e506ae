// /proc/self/stat and /proc/self/status readers.
#include "logs/ResourceMonitor.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

namespace ringtrain {

double ResourceMonitor::process_cpu_seconds() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return 0.0;
  // The command name (field 2) may contain spaces; fields after its closing ')' are fixed.
  const auto close = line.rfind(')');
  if (close == std::string::npos) return 0.0;
  unsigned long utime = 0;
  unsigned long stime = 0;
  // After ')': state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime(14) stime(15)
  if (std::sscanf(line.c_str() + close + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime,
                  &stime) != 2) {
    return 0.0;
  }
  static const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return static_cast<double>(utime + stime) / ticks;
}

std::pair<double, double> ResourceMonitor::memory_mb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  double rss = 0.0;
  double hwm = 0.0;
  while (std::getline(in, line)) {
    long kb = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %ld kB", &kb) == 1) rss = static_cast<double>(kb) / 1024.0;
    if (std::sscanf(line.c_str(), "VmHWM: %ld kB", &kb) == 1) hwm = static_cast<double>(kb) / 1024.0;
  }
  return {rss, hwm};
}

ResourceMonitor::ResourceMonitor()
    : start_wall_(Clock::now()), last_wall_(start_wall_), start_cpu_(process_cpu_seconds()), last_cpu_(start_cpu_) {}

ResourceSample ResourceMonitor::sample() {
  const auto now = Clock::now();
  const double cpu = process_cpu_seconds();
  const double wall = std::chrono::duration<double>(now - last_wall_).count();
  ResourceSample s;
  s.cpu_percent = wall > 0.0 ? 100.0 * (cpu - last_cpu_) / wall : 0.0;
  const auto [rss, hwm] = memory_mb();
  s.rss_mb = rss;
  s.peak_rss_mb = hwm;
  peak_rss_mb_ = std::max(peak_rss_mb_, hwm);
  last_wall_ = now;
  last_cpu_ = cpu;
  return s;
}

double ResourceMonitor::mean_cpu_percent() const {
  const double wall = std::chrono::duration<double>(Clock::now() - start_wall_).count();
  return wall > 0.0 ? 100.0 * (process_cpu_seconds() - start_cpu_) / wall : 0.0;
}

}  // namespace ringtrain
