// Ring all-reduce over MPI point-to-point (reduce-scatter then all-gather), float32 sum
// with an optional mean scale, in place, pipelined in chunks.
//
// Each of the N ranks sends and receives 2(N-1)/N of the buffer, which is bandwidth
// optimal (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
// workstations", JPDC 2009; Thakur, Rabenseifner & Gropp, "Optimization of collective
// communication operations in MPICH", IJHPCA 2005).
#pragma once

#include "collectives/Mpi.h"

#include <cstdint>
#include <span>
#include <vector>

#include "collectives/AllreduceTuning.h"
#include "collectives/TrafficStats.h"

namespace ringtrain {

// data <- sum over the ranks of `comm` (then * 1/N if mean). Every rank passes the same
// data.size(). `scratch` is reusable receive space (grown as needed). Adds its traffic
// and waits to `stats`.
void ring_allreduce(MPI_Comm comm, std::span<float> data, bool mean, const AllreduceTuning& tuning,
                    std::vector<float>& scratch, TrafficStats& stats);

// Payload bytes rank `rank` of `ranks` sends / receives in one ring all-reduce of `count`
// floats, accounting for uneven segments (segment i has partition_size(count, N, i)).
std::uint64_t ring_bytes_sent(std::size_t count, int ranks, int rank);
std::uint64_t ring_bytes_received(std::size_t count, int ranks, int rank);

}  // namespace ringtrain
