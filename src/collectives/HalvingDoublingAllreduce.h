// Recursive halving-doubling all-reduce (Rabenseifner; Thakur, Rabenseifner & Gropp 2005,
// section 4.5): reduce-scatter by recursive halving, all-gather by recursive doubling,
// with the standard fold of the extra ranks when N is not a power of two. Short vectors
// use plain recursive doubling (whole vector, log2 p exchanges), as MPICH does.
#pragma once

#include "collectives/Mpi.h"

#include <span>

#include "collectives/AllreduceScratch.h"
#include "collectives/TrafficStats.h"

namespace ringtrain {

// data <- (sum over the ranks of `comm`) * scale, in place, fp32 on the wire. Vectors of
// up to `doubling_max_bytes` use plain recursive doubling.
void halving_doubling_allreduce(MPI_Comm comm, std::span<float> data, float scale,
                                std::size_t doubling_max_bytes, AllreduceScratch& scratch,
                                TrafficStats& stats);

}  // namespace ringtrain
