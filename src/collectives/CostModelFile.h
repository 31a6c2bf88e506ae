// The cost model's tuning file: what `allreduce_bench --calibrate` writes and --tuning reads.
#pragma once

#include <string>

#include "collectives/AllreduceCostModel.h"
#include "collectives/Communicator.h"

namespace ringtrain {

// "key = value" lines, the keys named as AllreduceCostModel's fields ('#' starts a
// comment; keys not given keep their defaults). Throws std::runtime_error naming the file
// and line for an unknown key, a malformed line or a negative or non-finite value.
AllreduceCostModel read_cost_model(const std::string& path);
void write_cost_model(const AllreduceCostModel& model, const std::string& path,
                      const std::string& comment);
// The parameters as the file's "key = value" lines (full precision), in field order.
std::string cost_model_text(const AllreduceCostModel& model);

// Collective: reads `path` on every rank (empty: the built-in defaults everywhere) and
// checks that every rank read the same parameters. Throws std::runtime_error on every rank,
// with the same one-line message: the lowest failing rank's error and the ranks that could
// not read the file, or rank 0's path and the ranks that read other values (a file that
// differs between nodes).
AllreduceCostModel read_cost_model_everywhere(Communicator& comm, const std::string& path);

}  // namespace ringtrain
