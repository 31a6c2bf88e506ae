// Seconds between two steady-clock instants: the unit of every phase time ringtrain logs.
#pragma once

#include <chrono>

namespace ringtrain {

inline double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace ringtrain
