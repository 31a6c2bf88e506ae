// Versions and threading facts recorded in config.json.
#pragma once

#include "collectives/Communicator.h"
#include "common/Json.h"

namespace ringtrain {

// OpenMP threads each rank's oneDNN uses.
int threads_per_rank();
// {"ringtrain", "mpi", "onednn", "compiler"}
Json versions_json(const Communicator& comm);

}  // namespace ringtrain
