// Validation of a checkpoint's metadata section, as careful as the header's: every key a
// reader uses (resume, eval, inspect) is present, of its type and within its range, so no
// later cast, loop bound or allocation sees a missing, negative or absurd value.
#pragma once

#include <cstddef>
#include <string>

#include "common/Json.h"
#include "datasets/Dataset.h"

namespace ringtrain {

// Throws std::runtime_error "<source>: meta: key '<key>': expected <what>, got <value>"
// for the first key that is missing, of the wrong type or out of range. params_floats is
// the size of the params section, which num_params must equal.
void validate_checkpoint_meta(const Json& meta, std::size_t params_floats, const std::string& source);

// The dataset configuration a checkpoint was trained with (its config section).
DatasetConfig dataset_config_of(const Json& meta);

}  // namespace ringtrain
