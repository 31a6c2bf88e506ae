// Bucketed gradient averaging.
#include "train/GradientSync.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {

GradientSync::GradientSync(Communicator& comm, AllreduceAlgo algo, std::size_t num_params, double bucket_mb,
                           Compression compression)
    : comm_(comm), algo_(algo), compression_(compression) {
  if (!(bucket_mb > 0.0)) throw std::invalid_argument(fmt::format("--bucket-mb must be > 0 (got {})", bucket_mb));
  const auto per_bucket = std::max<std::size_t>(
      1, static_cast<std::size_t>(std::floor(bucket_mb * 1024.0 * 1024.0 / sizeof(float))));
  for (std::size_t offset = 0; offset < num_params; offset += per_bucket) {
    buckets_.emplace_back(offset, std::min(per_bucket, num_params - offset));
  }
}

void GradientSync::average(std::span<float> grads) {
  if (comm_.size() == 1) return;  // the mean over one rank is the identity
  for (const auto& [offset, count] : buckets_) {
    comm_.allreduce(grads.subspan(offset, count), algo_, /*mean=*/true, compression_);
  }
}

}  // namespace ringtrain
