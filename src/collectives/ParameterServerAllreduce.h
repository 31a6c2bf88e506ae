// The parameter-server pattern as an all-reduce: every rank sends its whole vector to
// rank 0, which sums (and scales) and sends the result back. Rank 0's link carries
// 2(N-1) vectors per call against the ring's 2(N-1)/N: the central bottleneck that the
// ring removes. Kept as the baseline of the classic experiment.
#pragma once

#include "collectives/Mpi.h"

#include <span>

#include "collectives/AllreduceScratch.h"
#include "collectives/Communicator.h"
#include "collectives/TrafficStats.h"

namespace ringtrain {

// data <- (sum over the ranks of `comm`) * scale, in place, moved in chunks of
// `chunk_bytes` on the wire; fp32 or 16-bit transport (the server adds in fp32 and sends
// back the rounded sum, which it keeps itself too).
void parameter_server_allreduce(MPI_Comm comm, std::span<float> data, float scale,
                                Compression compression, std::size_t chunk_bytes,
                                AllreduceScratch& scratch, TrafficStats& stats);

}  // namespace ringtrain
