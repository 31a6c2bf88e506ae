// Tunable parameters of the hand-written all-reduce algorithms and the size thresholds
// `auto` uses to pick one (crossovers measured on the development machine, see
// docs in AllreduceTuning.cpp).
#pragma once

#include <cstddef>

#include "collectives/Communicator.h"

namespace ringtrain {

struct AllreduceTuning {
  // Ring: the pipeline unit. Each segment (count / N elements) is sent as chunks of this
  // many bytes so that the reduction of chunk k overlaps the transfer of chunk k+1.
  std::size_t ring_chunk_bytes = 1024 * 1024;
  // Ring: receives posted ahead (2 = double-buffered receive).
  int ring_recv_depth = 2;
  // Parameter server: rank 0 handles the gradient in chunks of this many bytes.
  std::size_t ps_chunk_bytes = 1024 * 1024;
  // rd: vectors up to this size use plain recursive doubling (whole vector, log2 p steps)
  // instead of Rabenseifner's halving-doubling (2 log2 p steps, half the bytes).
  std::size_t rd_doubling_max_bytes = 2 * 1024;
  // auto: below these sizes use `rd`, from them on the ring; one threshold for ranks
  // spread over several hosts (network), one for all ranks on one host (shared memory).
  // Measured crossovers, see AllreduceTuning.cpp.
  std::size_t auto_ring_min_bytes = 1024 * 1024;
  std::size_t auto_ring_min_bytes_single_host = 4 * 1024 * 1024;
};

// The algorithm `auto` runs for a vector of `bytes` bytes on `ranks` ranks, all on one
// host or not.
AllreduceAlgo choose_auto_algo(std::size_t bytes, int ranks, bool single_host,
                               const AllreduceTuning& tuning);

}  // namespace ringtrain
