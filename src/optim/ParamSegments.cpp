// Builds the optimizer's segment list from ParamInfo ranges and checks step() arguments.
#include "optim/ParamSegments.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {

std::vector<ParamSegment> param_segments(std::span<const ParamInfo> params,
                                         std::size_t num_params, bool weights_only,
                                         bool merge) {
  std::vector<const ParamInfo*> sorted;
  sorted.reserve(params.size());
  for (const ParamInfo& info : params) {
    if (info.offset > num_params || info.count > num_params - info.offset) {
      throw std::invalid_argument(fmt::format(
          "optimizer: parameter \"{}\" [{}, {}) lies outside the parameter buffer of {} floats",
          info.name, info.offset, info.offset + info.count, num_params));
    }
    if (info.count > 0) sorted.push_back(&info);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const ParamInfo* a, const ParamInfo* b) { return a->offset < b->offset; });

  std::vector<ParamSegment> segments;
  const ParamInfo* prev = nullptr;
  for (const ParamInfo* info : sorted) {
    if (prev != nullptr && info->offset < prev->offset + prev->count) {
      throw std::invalid_argument(fmt::format(
          "optimizer: parameters \"{}\" [{}, {}) and \"{}\" [{}, {}) overlap", prev->name,
          prev->offset, prev->offset + prev->count, info->name, info->offset,
          info->offset + info->count));
    }
    const bool flag = !weights_only || info->kind == ParamKind::kWeight;
    if (merge && !segments.empty() && segments.back().flag == flag &&
        segments.back().offset + segments.back().count == info->offset) {
      segments.back().count += info->count;
    } else {
      segments.push_back({info->offset, info->count, flag});
    }
    prev = info;
  }
  return segments;
}

void check_step_args(std::string_view optimizer, std::size_t params_size,
                     std::size_t grads_size, std::size_t num_params, double lr) {
  if (params_size != num_params || grads_size != num_params) {
    throw std::invalid_argument(fmt::format(
        "{}: step expects params and grads of {} floats, got {} and {}", optimizer,
        num_params, params_size, grads_size));
  }
  if (!std::isfinite(lr) || lr < 0) {
    throw std::invalid_argument(
        fmt::format("{}: learning rate must be finite and >= 0, got {}", optimizer, lr));
  }
}

}  // namespace ringtrain
