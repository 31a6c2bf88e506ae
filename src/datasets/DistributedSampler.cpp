// DistributedSampler: rank-strided shards of a (seed, epoch) Fisher-Yates permutation.
//
// Rank r takes positions r, r + W, r + 2W, ... of the epoch's order (W = world size), as
// PyTorch's DistributedSampler does. Batch s of every rank then covers exactly positions
// [s*B*W, (s+1)*B*W) of the permutation, the same samples one rank with batch B*W would
// see at step s, which makes N ranks x batch B comparable to 1 rank x batch N*B.
#include "datasets/DistributedSampler.h"

#include <algorithm>
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
  const std::size_t per_rank = dataset_size_ / world;
  if (!blocks_.starts.empty()) {
    // Contiguous shares: a rank's samples come from its own blocks. The last
    // dataset_size % W positions of the order are dropped.
    const std::vector<std::size_t> order = block_order(epoch);
    indices_.assign(order.begin() + static_cast<std::ptrdiff_t>(rank * per_rank),
                    order.begin() + static_cast<std::ptrdiff_t>((rank + 1) * per_rank));
    return;
  }
  // Fisher-Yates (Knuth, TAOCP vol. 2, Algorithm P) on a stream every rank derives alike.
  std::vector<std::size_t> order(dataset_size_);
  for (std::size_t i = 0; i < dataset_size_; ++i) order[i] = i;
  Rng rng(derive_seed(seed_, {static_cast<std::uint64_t>(RngPurpose::kShuffle), epoch}));
  for (std::size_t i = dataset_size_; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  // The last dataset_size % W positions are dropped so all ranks hold floor(N / W).
  indices_.reserve(per_rank);
  for (std::size_t k = 0; k < per_rank; ++k) indices_.push_back(order[rank + k * world]);
}

void DistributedSampler::set_blocks(BlockShuffle blocks) {
  const auto& s = blocks.starts;
  for (std::size_t b = 0; b < s.size(); ++b)
    if ((b == 0 && s[0] != 0) || (b > 0 && s[b] <= s[b - 1]) || s[b] >= dataset_size_)
      throw std::invalid_argument("DistributedSampler: block starts must ascend from 0 within the data set");
  if (blocks.window_blocks < 1) throw std::invalid_argument("DistributedSampler: a window of at least one block");
  blocks_ = std::move(blocks);
  set_epoch(epoch_);
}

// Every sample once: the blocks permuted, then each window of blocks shuffled inside.
std::vector<std::size_t> DistributedSampler::block_order(std::uint64_t epoch) const {
  const std::vector<std::size_t>& starts = blocks_.starts;
  const std::size_t blocks = starts.size();
  const auto end_of = [&](std::size_t b) { return b + 1 < blocks ? starts[b + 1] : dataset_size_; };
  std::vector<std::size_t> perm(blocks);
  for (std::size_t b = 0; b < blocks; ++b) perm[b] = b;
  Rng rng(derive_seed(seed_, {static_cast<std::uint64_t>(RngPurpose::kShuffle), epoch, 1}));
  for (std::size_t i = blocks; i > 1; --i) std::swap(perm[i - 1], perm[rng.below(i)]);
  std::vector<std::size_t> order;
  order.reserve(dataset_size_);
  for (std::size_t w = 0; w < blocks; w += blocks_.window_blocks) {
    const std::size_t first = order.size();
    for (std::size_t b = w; b < std::min(blocks, w + blocks_.window_blocks); ++b)
      for (std::size_t i = starts[perm[b]]; i < end_of(perm[b]); ++i) order.push_back(i);
    for (std::size_t i = order.size() - first; i > 1; --i) std::swap(order[first + i - 1], order[first + rng.below(i)]);
  }
  return order;
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
