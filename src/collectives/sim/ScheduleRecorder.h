// Records the schedule of one all-reduce by running the real code (MpiCommunicator and
// the algorithm it dispatches to) on virtual ranks over the simulated MPI (SimMpi.cpp),
// with real data: every rank's result is checked against the exact sum.
#pragma once

#include <cstddef>

#include "collectives/AllreduceCostModel.h"
#include "collectives/AllreduceTuning.h"
#include "collectives/Communicator.h"
#include "collectives/sim/Schedule.h"

namespace ringtrain::sim {

struct RecordRequest {
  AllreduceAlgo algo = AllreduceAlgo::kRing;  // kAuto: resolved at `bytes` by plan_auto_allreduce
  int ranks = 2;
  int ranks_per_node = 1;    // ranks r / ranks_per_node share a node (memory and a link)
  std::size_t bytes = 4096;  // fp32 vector, bytes
  Compression compression = Compression::kNone;
  AllreduceTuning tuning;
  AllreduceCostModel model;  // what auto chooses by
  // Largest recorded vector summed over the ranks. A larger call is recorded at a size s
  // times smaller (s a power of two, at most kMaxScale), with every byte threshold of the
  // tuning (chunks, pieces, rd's doubling limit) divided by s too, so the recording has the
  // same messages, rounds and chunk counts; Schedule::byte_scale = s scales its bytes
  // back. Rounding to whole elements moves a chunk boundary by less than s * 4 bytes: the
  // network chunk (65408 B) is 16352 floats, recorded at 512x as 31 (3% short), which can
  // add a chunk to a segment. test/collectives/sim checks the times against a recording
  // at full size.
  std::size_t max_recorded_bytes = std::size_t{64} << 20;
};

inline constexpr std::size_t kMaxScale = 512;

struct Recording {
  Schedule schedule;
  AllreduceAlgo algo = AllreduceAlgo::kRing;  // what ran (auto resolved)
  int rab_lanes = 1;                          // rab's lanes (resolved_rab_lanes); 1 otherwise
  std::size_t recorded_count = 0;             // floats per rank in the recorded run
  bool exact = false;  // every rank ended with the exact sum (fp32 transport; integers)
};

// Throws std::invalid_argument for ranks < 2, ranks_per_node < 1, bytes < 4, or algo mpi
// (MPI's own algorithm is not code of this tree).
Recording record_allreduce(const RecordRequest& request);

// What auto runs for the request's size and layout (plan_auto_allreduce); other algorithms
// as they are.
AllreduceAlgo resolved_algo(const RecordRequest& request);
// The lanes rab runs in when the request resolves to rab (plan_rab_lanes); else 1.
int resolved_rab_lanes(const RecordRequest& request);

// The power of two the request is recorded smaller by (1: recorded as it is).
std::size_t recording_scale(const RecordRequest& request);

}  // namespace ringtrain::sim
