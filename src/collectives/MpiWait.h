// MPI waits that add the time spent blocked to TrafficStats::wait_seconds (the
// Communicator's wait_seconds(): time waiting for peers, not reducing or copying).
#pragma once

#include "collectives/Mpi.h"

#include <chrono>

#include "collectives/MpiCheck.h"
#include "collectives/TrafficStats.h"

namespace ringtrain {

inline void timed_wait(MPI_Request* request, TrafficStats& stats) {
  const auto start = std::chrono::steady_clock::now();
  RINGTRAIN_MPI_CHECK(MPI_Wait(request, MPI_STATUS_IGNORE));
  stats.wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline void timed_waitall(int count, MPI_Request* requests, TrafficStats& stats) {
  if (count == 0) return;
  const auto start = std::chrono::steady_clock::now();
  RINGTRAIN_MPI_CHECK(MPI_Waitall(count, requests, MPI_STATUSES_IGNORE));
  stats.wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace ringtrain
