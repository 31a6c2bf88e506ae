// `allreduce_bench --calibrate`: the cost model's parameters measured on the job's own
// ranks and links, between rank 0 and the last rank of the node order (another node when
// there are several).
#pragma once

#include "collectives/AllreduceCostModel.h"
#include "collectives/MpiCommunicator.h"

namespace ringtrain {

// Collective over comm (size >= 2, else std::invalid_argument); every rank returns the
// same model, `base` with the measured fields replaced:
//   alpha: half the round trip of an 8-byte ping-pong (best of 200);
//   beta:  seconds per byte when the two ranks stream 16 MiB to each other at once in
//          chunks of the ring's network chunk (best of 3), as the ring and rab use a link;
//   rendezvous_beta: the same stream in messages of 4 x base.eager_limit_bytes (at least
//          1 MiB), sent whole as rd sends its rounds (best of 3);
//   gamma: seconds per byte of reduce_add over 16 MiB on rank 0 (best of 3);
//   copy:  seconds per byte of a 16 MiB memcpy on rank 0 (best of 3).
// eager_limit_bytes, choice_margin and hier_margin are not measured: they stay as in `base`.
AllreduceCostModel calibrate_cost_model(MpiCommunicator& comm, const AllreduceCostModel& base = {});

}  // namespace ringtrain
