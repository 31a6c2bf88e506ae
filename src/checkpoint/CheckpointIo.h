// Collective checkpoint reading: rank 0 reads and validates, then broadcasts the bytes, so
// nodes need no shared filesystem and every rank reports the same error.
#pragma once

#include <filesystem>
#include <string>

#include "collectives/Communicator.h"
#include "checkpoint/Checkpoint.h"

namespace ringtrain {

class Model;

// Rank root's string on every rank.
std::string broadcast_string(Communicator& comm, const std::string& value, int root);

// Rank 0 reads and validates `path`; every rank returns the data, or every rank throws
// CollectiveError with rank 0's message (missing file, corrupt section, ...).
CheckpointData load_checkpoint_collective(Communicator& comm, const std::filesystem::path& path);

// Throws CollectiveError naming the file and the section when the checkpoint is of
// another model (signature, parameter or buffer count).
void check_checkpoint_matches(const CheckpointData& ck, const Model& model, const std::string& source);

}  // namespace ringtrain
