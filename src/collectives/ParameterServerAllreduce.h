// The parameter-server pattern as an all-reduce: every rank sends its whole vector to
// rank 0, which sums (and scales) and sends the result back. Rank 0's link carries
// 2(N-1) vectors per call against the ring's 2(N-1)/N: the central bottleneck that the
// ring removes. Kept as the baseline of the classic experiment.
#pragma once

#include "collectives/Mpi.h"

#include <span>
#include <vector>

#include "collectives/AllreduceTuning.h"
#include "collectives/TrafficStats.h"

namespace ringtrain {

void parameter_server_allreduce(MPI_Comm comm, std::span<float> data, bool mean,
                                const AllreduceTuning& tuning, std::vector<float>& scratch,
                                TrafficStats& stats);

}  // namespace ringtrain
