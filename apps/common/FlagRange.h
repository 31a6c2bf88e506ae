// Bounds on a number flag, shown in --help and in usage errors as a person writes them:
// `--servers INT:(>= 1)=1` and "--servers: must be >= 1 (got 0)" (CLI11 2.1's Range and
// NonNegativeNumber print a double's limits: "0.000000 to 1797693...").
#pragma once

#include <CLI/CLI.hpp>

namespace ringtrain {

// value >= min.
CLI::Validator at_least(double min);
// min <= value <= max.
CLI::Validator from_to(double min, double max);

}  // namespace ringtrain
