// Contiguous runs of the flat parameter buffer that an optimizer updates alike, built and
// validated from a model's ParamInfo list, and the argument check every step() shares.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "nn/ParamInfo.h"

namespace ringtrain {

struct ParamSegment {
  std::size_t offset = 0;  // in floats
  std::size_t count = 0;
  bool flag = true;        // the per-segment choice the optimizer asked for (see below)
};

// One segment per non-empty tensor, sorted by offset; flag = (kind == kWeight) when
// weights_only, else true. With merge, neighbouring segments (no gap) with the same flag
// become one, so step() runs few, long, vectorised loops. Throws std::invalid_argument
// naming the tensor if a range leaves [0, num_params) or two ranges overlap.
std::vector<ParamSegment> param_segments(std::span<const ParamInfo> params,
                                         std::size_t num_params, bool weights_only,
                                         bool merge);

// Throws std::invalid_argument unless params and grads hold num_params floats and lr is
// finite and >= 0.
void check_step_args(std::string_view optimizer, std::size_t params_size,
                     std::size_t grads_size, std::size_t num_params, double lr);

}  // namespace ringtrain
