// Splits `count` elements into `parts` contiguous segments as evenly as possible: the
// first count % parts segments get one element more. Used by the ring (N segments) and by
// recursive halving (p blocks); segments may be empty when count < parts.
#pragma once

#include <algorithm>
#include <cstddef>

namespace ringtrain {

inline std::size_t partition_begin(std::size_t count, std::size_t parts, std::size_t i) {
  const std::size_t base = count / parts;
  const std::size_t extra = count % parts;
  return i * base + std::min(i, extra);
}

inline std::size_t partition_size(std::size_t count, std::size_t parts, std::size_t i) {
  return count / parts + (i < count % parts ? 1 : 0);
}

}  // namespace ringtrain
