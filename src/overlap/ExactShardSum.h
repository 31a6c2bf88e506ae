// The exact gradient sum of --logical-shards: S shards of the global batch, S/p on each of
// p ranks, combined so that the result has the same bits for every p that divides S.
//
// Floating-point addition is not associative, so any float all-reduce gives bits that
// depend on how the shards are spread over ranks. Here each shard's gradient becomes int64
// fixed point with one power-of-two scale per bucket, taken from the global max |g| over
// all S shards (a max all-reduce: exact, and independent of p), and the int64 values are
// added locally and across ranks (MPI_Allreduce MPI_INT64_T MPI_SUM): integer addition is
// exact in every order. The scale leaves S * max |q| below 2^51, so no partial sum can come
// near overflow, and the largest value of a bucket keeps 51 - ceil(log2 S) bits (fp32 has 24).
// Batch-norm running statistics get the same treatment in a cheaper form: every shard's
// buffers travel in its own slot (a sum of one value and zeros is exact) and every rank
// averages the S slots in shard order.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "collectives/Communicator.h"
#include "overlap/GradientSync.h"

namespace ringtrain {

class ExactShardSum {
 public:
  // buckets: [offset, count) ranges covering num_params (GradientSync's, so --bucket-mb sets
  // the scale's granularity). shards: S; comm.size() must divide it (std::invalid_argument).
  ExactShardSum(Communicator& comm, std::vector<std::pair<std::size_t, std::size_t>> buckets, std::size_t num_params,
                std::size_t num_buffers, int shards);

  int shards() const noexcept { return shards_; }
  int local_shards() const noexcept { return local_; }
  Communicator& comm() const noexcept { return comm_; }
  // The global index of this rank's first shard: rank * S / p (shards are contiguous).
  int first_shard() const noexcept { return first_; }

  // At the start of each step: the clock SyncTimes::slices are measured from.
  void begin() { begin_time_ = std::chrono::steady_clock::now(); }

  // Local shard i (0 .. local_shards()-1, each once per step): its gradient (the mean over
  // its samples) and the model's buffers after its forward.
  void add(int i, std::span<const float> grads, std::span<const float> buffers);

  // totals <- sum over ranks (loss, accuracy, the stop flag): the step's agreement.
  void agree(StepTotals& totals);

  // grads <- (1/S) x the exact sum over all S shards; buffers <- their mean over shards, in
  // shard order. Throws CollectiveError on every rank if a gradient is not finite. Of the
  // returned allreduce, wait is the seconds inside MPI calls and convert the rest.
  SyncTimes reduce(std::span<float> grads, std::span<float> buffers);

  // Bytes of one reduce on the wire per rank and direction (p > 1): 8 per parameter, 8 per
  // bucket for the max, 8 x S per buffer float.
  std::size_t wire_bytes() const noexcept;

 private:
  void exact_sum_of_bucket(std::size_t b, double max_abs);
  // Runs an MPI call, adding its seconds to mpi_seconds_.
  template <typename F>
  void in_mpi(F&& call) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    mpi_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  Communicator& comm_;
  std::vector<std::pair<std::size_t, std::size_t>> buckets_;
  std::size_t num_params_;
  std::size_t num_buffers_;
  int shards_;
  int local_;
  int first_;
  std::vector<float> grads_;        // local_ x num_params: each local shard's gradient
  std::vector<double> max_abs_;     // per bucket, over the local shards (inf: non-finite seen)
  std::vector<std::int64_t> fixed_; // num_params: the fixed-point sum
  std::vector<double> slots_;       // S x num_buffers: shard k's buffers in row k, zeros elsewhere
  std::vector<double> scales_;      // per bucket: 2^e of this step
  std::chrono::steady_clock::time_point begin_time_;
  double mpi_seconds_ = 0.0;  // reduce()'s seconds inside MPI calls so far
};

}  // namespace ringtrain
