// DistributedSampler: rank-strided shards of a (seed, epoch) Fisher-Yates permutation.
//
// Rank r takes positions r, r + W, r + 2W, ... of the epoch's order (W = world size), as
// PyTorch's DistributedSampler does. Batch s of every rank then covers exactly positions
// [s*B*W, (s+1)*B*W) of the permutation, the same samples one rank with batch B*W would
// see at step s, which makes N ranks x batch B comparable to 1 rank x batch N*B.
#include "datasets/DistributedSampler.h"

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "common/Random.h"

namespace ringtrain {

DistributedSampler::DistributedSampler(std::size_t dataset_size, int rank, int world_size, std::uint64_t seed, Mode mode)
    : dataset_size_(dataset_size), rank_(rank), world_size_(world_size), seed_(seed), mode_(mode) {
  if (world_size_ < 1) throw std::invalid_argument(fmt::format("DistributedSampler: world size {} < 1", world_size_));
  if (rank_ < 0 || rank_ >= world_size_)
    throw std::invalid_argument(fmt::format("DistributedSampler: rank {} outside 0..{}", rank_, world_size_ - 1));
  set_epoch(0);
}

void DistributedSampler::set_epoch(std::uint64_t epoch) {
  epoch_ = epoch;
  const auto world = static_cast<std::size_t>(world_size_);
  const auto rank = static_cast<std::size_t>(rank_);
  indices_.clear();
  if (mode_ == Mode::kEval) {
    // Every sample exactly once: rank r gets r, r+W, ...; shard sizes differ by at most one.
    for (std::size_t i = rank; i < dataset_size_; i += world) indices_.push_back(i);
    return;
  }
  // Fisher-Yates (Knuth, TAOCP vol. 2, Algorithm P) on a stream every rank derives alike.
  std::vector<std::size_t> order(dataset_size_);
  for (std::size_t i = 0; i < dataset_size_; ++i) order[i] = i;
  Rng rng(derive_seed(seed_, {static_cast<std::uint64_t>(RngPurpose::kShuffle), epoch}));
  for (std::size_t i = dataset_size_; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  // The last dataset_size % W positions are dropped so all ranks hold floor(N / W).
  const std::size_t per_rank = dataset_size_ / world;
  indices_.reserve(per_rank);
  for (std::size_t k = 0; k < per_rank; ++k) indices_.push_back(order[rank + k * world]);
}

std::size_t DistributedSampler::steps(std::size_t batch_size) const {
  if (batch_size == 0) throw std::invalid_argument("DistributedSampler: batch size must be positive");
  return mode_ == Mode::kTrain ? indices_.size() / batch_size : (indices_.size() + batch_size - 1) / batch_size;
}

std::span<const std::size_t> DistributedSampler::batch(std::size_t step, std::size_t batch_size) const {
  const std::size_t n = steps(batch_size);
  if (step >= n)
    throw std::out_of_range(fmt::format("DistributedSampler: step {} outside 0..{} (batch {}, {} samples on rank {})", step,
                                        n == 0 ? 0 : n - 1, batch_size, indices_.size(), rank_));
  const std::size_t begin = step * batch_size;
  return std::span<const std::size_t>(indices_).subspan(begin, std::min(batch_size, indices_.size() - begin));
}

}  // namespace ringtrain
