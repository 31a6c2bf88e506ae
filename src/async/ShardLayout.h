// How the flat parameter vector is split over the parameter servers: S contiguous shards
// balanced by size (their lengths differ by at most one float), and the parameter
// tensors, or the parts of them, that fall inside each shard.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "nn/ParamInfo.h"

namespace ringtrain {

class ShardLayout {
 public:
  // Throws std::invalid_argument for shards < 1. Shards may be empty when num_params < shards.
  ShardLayout(std::size_t num_params, int shards);

  int shards() const noexcept { return shards_; }
  std::size_t num_params() const noexcept { return num_params_; }
  std::size_t begin(int shard) const;
  std::size_t size(int shard) const;
  std::size_t end(int shard) const { return begin(shard) + size(shard); }
  std::size_t largest() const noexcept { return size(0); }  // the first shards get the extra floats
  // The shard holding flat index i (i < num_params).
  int owner(std::size_t i) const;

  // The tensors of `all` clipped to the shard, with offsets relative to its start: what a
  // server builds its optimizer over. A tensor cut by a boundary appears in both shards.
  std::vector<ParamInfo> params_in(int shard, std::span<const ParamInfo> all) const;
  // True when some tensor of `all` is cut by a shard boundary (LARS needs whole tensors).
  bool splits_a_tensor(std::span<const ParamInfo> all) const;

 private:
  void check(int shard) const;
  std::size_t num_params_;
  int shards_;
};

}  // namespace ringtrain
