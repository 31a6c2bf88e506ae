// What a collective did on this rank: payload bytes moved and time blocked in MPI waits.
#pragma once

#include <cstdint>

namespace ringtrain {

struct TrafficStats {
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  double wait_seconds = 0.0;
};

}  // namespace ringtrain
