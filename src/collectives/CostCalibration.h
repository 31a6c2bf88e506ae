// `allreduce_bench --calibrate`: the cost model's parameters measured on the job's own
// ranks and links, between rank 0 and the last rank of the node order (another node when
// there are several).
#pragma once

#include "collectives/AllreduceCostModel.h"
#include "collectives/MpiCommunicator.h"

namespace ringtrain {

// Collective over comm (size >= 2, else std::invalid_argument); every rank returns the
// same model:
//   alpha: half the round trip of an 8-byte ping-pong (best of 200);
//   beta:  seconds per byte when the two ranks stream 16 MiB to each other at once in
//          chunks of the ring's network chunk (best of 3), as the ring and rab use a link;
//   gamma: seconds per byte of reduce_add over 16 MiB on rank 0 (best of 3).
AllreduceCostModel calibrate_cost_model(MpiCommunicator& comm);

}  // namespace ringtrain
