// MPI waits that add the time spent blocked to TrafficStats::wait_seconds (the
// Communicator's wait_seconds(): time waiting for peers, not reducing or copying), and
// tell the stall watchdog (StallRecord.h) what they wait for: the peer rank when there is
// one, and "receive" / "send" / "exchange".
#pragma once

#include "collectives/Mpi.h"

#include <chrono>

#include "collectives/MpiCheck.h"
#include "collectives/StallRecord.h"
#include "collectives/TrafficStats.h"

namespace ringtrain {

inline void timed_wait(MPI_Request* request, TrafficStats& stats, int peer = StallRecord::kAllRanks,
                       const char* what = "wait") {
  const auto start = std::chrono::steady_clock::now();
  StallRecord::instance().begin_wait(what, peer, start);
  const int rc = MPI_Wait(request, MPI_STATUS_IGNORE);
  StallRecord::instance().end_wait();
  RINGTRAIN_MPI_CHECK(rc);
  stats.wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline void timed_waitall(int count, MPI_Request* requests, TrafficStats& stats, int peer = StallRecord::kAllRanks,
                          const char* what = "wait") {
  if (count == 0) return;
  const auto start = std::chrono::steady_clock::now();
  StallRecord::instance().begin_wait(what, peer, start);
  const int rc = MPI_Waitall(count, requests, MPI_STATUSES_IGNORE);
  StallRecord::instance().end_wait();
  RINGTRAIN_MPI_CHECK(rc);
  stats.wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace ringtrain
