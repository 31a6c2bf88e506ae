// Averages the flat gradient buffer across ranks in buckets: contiguous ranges in buffer
// order, which is reverse layer order, so the first bucket holds the gradients backward
// finishes first. With overlap, one communication thread reduces each bucket as soon as
// backward has finished all of it, while backward goes on with the layers before it.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "collectives/Communicator.h"

namespace ringtrain {

class CommThread;

// What ranks agree on every step, summed over ranks. A step is discarded (no bucket is
// sent, no update applied) when any rank asked to stop: stop > 0 after the sum.
struct StepTotals {
  double loss_sum = 0.0;
  double correct = 0.0;
  double count = 0.0;
  double stop = 0.0;
};

// One step's communication, as the step reports it.
struct SyncTimes {
  double allreduce = 0.0;  // seconds spent in the step's operations (agreement + buckets)
  double exposed = 0.0;    // of those, the seconds after the compute thread reached finish()
  double wait = 0.0;       // of allreduce, seconds blocked in MPI waits
  double convert = 0.0;    // of allreduce, ExactShardSum's own work (0 for GradientSync)
  // Each operation as (start, end), seconds after begin(); the agreement first.
  std::vector<std::pair<double, double>> slices;
};

class GradientSync {
 public:
  // bucket_mb: upper bound of one bucket's size in MiB (at least one float). overlap: use a
  // communication thread (needs a communicator that allows MPI calls from another thread).
  // compression: the gradients' transport (the additions stay fp32).
  GradientSync(Communicator& comm, AllreduceAlgo algo, std::size_t num_params, double bucket_mb,
               bool overlap = false, Compression compression = Compression::kNone);
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // grads <- mean over ranks, bucket by bucket, on the calling thread.
  void average(std::span<float> grads);

  // One step, overlapped or not; the same buckets are reduced in the same order either way,
  // so the results are bit-identical:
  //   begin(grads); agree(totals); ready(offset, count)...; finish();
  // agree() once per step, from the compute thread, after the loss is known (it may come
  // before, between or after the ready() calls). ready() ranges must arrive in buffer order
  // (backward's order); finish() takes everything not yet ready as ready. Between begin()
  // and finish() the caller makes no other call on the communicator.
  void begin(std::span<float> grads);
  // totals <- sum over ranks; without overlap on return, with overlap by finish().
  void agree(StepTotals& totals);
  void ready(std::size_t offset, std::size_t count);
  SyncTimes finish();

  bool overlapped() const noexcept { return thread_ != nullptr; }
  // The ranks it reduces over (after finish(), free for the caller's own collectives).
  Communicator& comm() const noexcept { return comm_; }

  // [offset, offset + count) of each bucket, in the order they are reduced.
  const std::vector<std::pair<std::size_t, std::size_t>>& buckets() const noexcept { return buckets_; }

 private:
  using Clock = std::chrono::steady_clock;
  void reduce_bucket(std::size_t index);   // on the communication thread when overlapped
  void run_agreement(StepTotals& totals);  // likewise
  void post_ready_buckets();

  Communicator& comm_;
  AllreduceAlgo algo_;
  Compression compression_;
  std::vector<std::pair<std::size_t, std::size_t>> buckets_;
  std::unique_ptr<CommThread> thread_;

  // The step under way. slices_ and stopped_ are written by whichever thread runs the
  // operations and read by the caller after the thread is idle.
  std::span<float> grads_;
  Clock::time_point begin_time_;
  std::size_t ready_upto_ = 0;    // grads_[0, ready_upto_) are final
  std::size_t next_bucket_ = 0;   // first bucket not yet handed over
  bool agreed_ = false;
  bool stopped_ = false;          // the agreement said stop: buckets are skipped
  double wait_before_ = 0.0;
  std::vector<std::pair<double, double>> slices_;
};

}  // namespace ringtrain
