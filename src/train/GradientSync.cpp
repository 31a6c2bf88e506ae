// Bucketed gradient averaging.
#include "train/GradientSync.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "collectives/StallRecord.h"

namespace ringtrain {

GradientSync::GradientSync(Communicator& comm, AllreduceAlgo algo, std::size_t num_params, double bucket_mb)
    : comm_(comm), algo_(algo) {
  if (!(bucket_mb > 0.0)) throw std::invalid_argument(fmt::format("--bucket-mb must be > 0 (got {})", bucket_mb));
  const auto per_bucket = std::max<std::size_t>(
      1, static_cast<std::size_t>(std::floor(bucket_mb * 1024.0 * 1024.0 / sizeof(float))));
  for (std::size_t offset = 0; offset < num_params; offset += per_bucket) {
    buckets_.emplace_back(offset, std::min(per_bucket, num_params - offset));
  }
}

void GradientSync::average(std::span<float> grads) {
  if (comm_.size() == 1) return;  // the mean over one rank is the identity
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    StallRecord::instance().set_bucket(static_cast<int>(b), static_cast<int>(buckets_.size()));  // stall watchdog
    comm_.allreduce(grads.subspan(buckets_[b].first, buckets_[b].second), algo_, /*mean=*/true);
  }
  StallRecord::instance().set_bucket(-1, static_cast<int>(buckets_.size()));
}

}  // namespace ringtrain
