// Splits a dataset's indices across ranks, like PyTorch's DistributedSampler but exact:
// training permutes with (seed, epoch), identical on every rank, and drops the remainder
// so every rank takes the same number of steps; evaluation covers every sample exactly
// once across ranks, without the padding duplicates that skew PyTorch's accuracy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ringtrain {

// --shuffle block: the epoch's order is the blocks (runs of samples stored together) in a
// random order, then the samples shuffled within each window of `window_blocks` consecutive
// blocks of that order; rank r takes the r-th contiguous 1/W of it, so each rank reads whole
// blocks, a few at a time, rather than single records from everywhere.
struct BlockShuffle {
  std::vector<std::size_t> starts;  // first sample of each block, ascending from 0
  std::size_t window_blocks = 4;
};

class DistributedSampler {
 public:
  enum class Mode { kTrain, kEval };

  DistributedSampler(std::size_t dataset_size, int rank, int world_size, std::uint64_t seed, Mode mode);

  // Training order by blocks from now on (empty starts: the exact permutation again).
  // Throws std::invalid_argument for starts that are not ascending from 0 within the size.
  void set_blocks(BlockShuffle blocks);

  // Recomputes this rank's indices for the given epoch (train: a new permutation).
  void set_epoch(std::uint64_t epoch);
  std::uint64_t epoch() const noexcept { return epoch_; }

  // This rank's indices for the current epoch, in visiting order.
  std::span<const std::size_t> indices() const noexcept { return indices_; }

  // Batches per epoch for a per-rank batch size. Train: floor (a partial batch is dropped,
  // and every rank gets the same count); eval: ceil (a smaller last batch).
  std::size_t steps(std::size_t batch_size) const;

  // Indices of batch `step` (0-based) of the current epoch; resuming at (epoch, step) is
  // set_epoch(epoch) then batch(step, ...) onwards.
  std::span<const std::size_t> batch(std::size_t step, std::size_t batch_size) const;

 private:
  std::size_t dataset_size_;
  int rank_;
  int world_size_;
  std::uint64_t seed_;
  Mode mode_;
  std::uint64_t epoch_ = 0;
  std::vector<std::size_t> indices_;
  BlockShuffle blocks_;

  std::vector<std::size_t> block_order(std::uint64_t epoch) const;
};

}  // namespace ringtrain
