// Averages the flat gradient buffer across ranks in buckets: contiguous ranges in buffer
// order, which is reverse layer order, so the first bucket holds the gradients backward
// finishes first (the layout that lets a bucket start before backward ends).
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "collectives/Communicator.h"

namespace ringtrain {

class GradientSync {
 public:
  // bucket_mb: upper bound of one bucket's size in MiB (at least one float); compression:
  // the gradients' transport (the additions stay fp32).
  GradientSync(Communicator& comm, AllreduceAlgo algo, std::size_t num_params, double bucket_mb,
               Compression compression = Compression::kNone);

  // grads <- mean over ranks, bucket by bucket.
  void average(std::span<float> grads);

  // [offset, offset + count) of each bucket, in the order they are reduced.
  const std::vector<std::pair<std::size_t, std::size_t>>& buckets() const noexcept { return buckets_; }

 private:
  Communicator& comm_;
  AllreduceAlgo algo_;
  Compression compression_;
  std::vector<std::pair<std::size_t, std::size_t>> buckets_;
};

}  // namespace ringtrain
