// ShardLayout: contiguous, size-balanced shards of the flat parameter vector.
#include "async/ShardLayout.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "collectives/EvenPartition.h"

namespace ringtrain {

ShardLayout::ShardLayout(std::size_t num_params, int shards) : num_params_(num_params), shards_(shards) {
  if (shards < 1) throw std::invalid_argument("ShardLayout: need at least one shard (got " + std::to_string(shards) + ")");
}

void ShardLayout::check(int shard) const {
  if (shard < 0 || shard >= shards_) {
    throw std::out_of_range("ShardLayout: shard " + std::to_string(shard) + " outside [0, " + std::to_string(shards_) +
                            ")");
  }
}

std::size_t ShardLayout::begin(int shard) const {
  check(shard);
  return partition_begin(num_params_, static_cast<std::size_t>(shards_), static_cast<std::size_t>(shard));
}

std::size_t ShardLayout::size(int shard) const {
  check(shard);
  return partition_size(num_params_, static_cast<std::size_t>(shards_), static_cast<std::size_t>(shard));
}

int ShardLayout::owner(std::size_t i) const {
  if (i >= num_params_) throw std::out_of_range("ShardLayout::owner: index past the parameters");
  // Shards 0..extra-1 hold base+1 floats, the rest base.
  const std::size_t base = num_params_ / static_cast<std::size_t>(shards_);
  const std::size_t extra = num_params_ % static_cast<std::size_t>(shards_);
  const std::size_t long_part = extra * (base + 1);
  if (i < long_part) return static_cast<int>(i / (base + 1));
  return static_cast<int>(extra + (i - long_part) / base);
}

std::vector<ParamInfo> ShardLayout::params_in(int shard, std::span<const ParamInfo> all) const {
  const std::size_t lo = begin(shard);
  const std::size_t hi = end(shard);
  std::vector<ParamInfo> out;
  for (const ParamInfo& p : all) {
    const std::size_t a = std::max(lo, p.offset);
    const std::size_t b = std::min(hi, p.offset + p.count);
    if (a >= b) continue;
    ParamInfo part = p;
    part.offset = a - lo;
    part.count = b - a;
    out.push_back(std::move(part));
  }
  return out;
}

bool ShardLayout::splits_a_tensor(std::span<const ParamInfo> all) const {
  for (const ParamInfo& p : all) {
    if (p.count == 0) continue;
    if (owner(p.offset) != owner(p.offset + p.count - 1)) return true;
  }
  return false;
}

}  // namespace ringtrain
