// Bucketed gradient averaging, on the calling thread or on one communication thread.
#include "overlap/GradientSync.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "collectives/StallRecord.h"
#include "common/Seconds.h"
#include "overlap/CommThread.h"

namespace ringtrain {

GradientSync::GradientSync(Communicator& comm, AllreduceAlgo algo, std::size_t num_params, double bucket_mb,
                           bool overlap, Compression compression)
    : comm_(comm), algo_(algo), compression_(compression) {
  if (!(bucket_mb > 0.0)) throw std::invalid_argument(fmt::format("--bucket-mb must be > 0 (got {})", bucket_mb));
  const auto per_bucket = std::max<std::size_t>(
      1, static_cast<std::size_t>(std::floor(bucket_mb * 1024.0 * 1024.0 / sizeof(float))));
  for (std::size_t offset = 0; offset < num_params; offset += per_bucket) {
    buckets_.emplace_back(offset, std::min(per_bucket, num_params - offset));
  }
  // One rank has nothing to send: the thread would only add hand-off latency.
  if (overlap && comm_.size() > 1) thread_ = std::make_unique<CommThread>();
}

GradientSync::~GradientSync() = default;

void GradientSync::average(std::span<float> grads) {
  if (comm_.size() == 1) return;  // the mean over one rank is the identity
  for (const auto& [offset, count] : buckets_) {
    comm_.allreduce(grads.subspan(offset, count), algo_, /*mean=*/true, compression_);
  }
}

void GradientSync::begin(std::span<float> grads) {
  std::size_t total = 0;
  for (const auto& b : buckets_) total += b.second;
  if (grads.size() != total) {
    throw std::invalid_argument(
        fmt::format("GradientSync: {} gradients for buckets over {} parameters", grads.size(), total));
  }
  grads_ = grads;
  begin_time_ = Clock::now();
  ready_upto_ = 0;
  next_bucket_ = 0;
  agreed_ = false;
  stopped_ = false;
  slices_.clear();
  wait_before_ = comm_.wait_seconds();
}

void GradientSync::run_agreement(StepTotals& totals) {
  const auto t0 = Clock::now();
  double values[4] = {totals.loss_sum, totals.correct, totals.count, totals.stop};
  StallRecord::instance().set_bucket(-1, static_cast<int>(buckets_.size()));  // stall watchdog
  comm_.allreduce_sum(values);
  totals = {values[0], values[1], values[2], values[3]};
  // Every rank sees the same sum, so all of them skip the buckets together.
  stopped_ = totals.stop > 0.0;
  slices_.emplace_back(seconds_between(begin_time_, t0), seconds_between(begin_time_, Clock::now()));
}

void GradientSync::reduce_bucket(std::size_t index) {
  if (stopped_ || comm_.size() == 1) return;  // a stopped step's gradients are discarded
  const auto t0 = Clock::now();
  const auto [offset, count] = buckets_[index];
  StallRecord::instance().set_bucket(static_cast<int>(index), static_cast<int>(buckets_.size()));  // stall watchdog
  comm_.allreduce(grads_.subspan(offset, count), algo_, /*mean=*/true, compression_);
  // Done: a later wait (a metrics sum, a checkpoint's broadcast) is in no bucket.
  StallRecord::instance().set_bucket(-1, static_cast<int>(buckets_.size()));
  slices_.emplace_back(seconds_between(begin_time_, t0), seconds_between(begin_time_, Clock::now()));
}

void GradientSync::agree(StepTotals& totals) {
  if (agreed_) throw std::logic_error("GradientSync::agree called twice in one step");
  agreed_ = true;
  if (thread_) {
    thread_->post([this, &totals] { run_agreement(totals); });
  } else {
    run_agreement(totals);
  }
}

void GradientSync::ready(std::size_t offset, std::size_t count) {
  if (offset != ready_upto_ || offset + count > grads_.size()) {
    throw std::logic_error(fmt::format("GradientSync::ready: range [{}, {}) after [0, {}) of {}: ranges must come "
                                       "in buffer order",
                                       offset, offset + count, ready_upto_, grads_.size()));
  }
  ready_upto_ = offset + count;
  if (thread_) post_ready_buckets();
}

void GradientSync::post_ready_buckets() {
  while (next_bucket_ < buckets_.size()) {
    const auto [offset, count] = buckets_[next_bucket_];
    if (offset + count > ready_upto_) break;
    const std::size_t index = next_bucket_++;
    thread_->post([this, index] { reduce_bucket(index); });
  }
}

SyncTimes GradientSync::finish() {
  if (!agreed_) throw std::logic_error("GradientSync::finish without agree");
  const auto compute_done = Clock::now();
  ready_upto_ = grads_.size();
  if (thread_) {
    post_ready_buckets();
    thread_->wait_idle();
  } else {
    for (; next_bucket_ < buckets_.size(); ++next_bucket_) reduce_bucket(next_bucket_);
  }
  SyncTimes t;
  const double done = seconds_between(begin_time_, compute_done);
  for (const auto& [start, end] : slices_) {
    t.allreduce += end - start;
    // Without overlap nothing runs beside compute: all of it is exposed. With overlap, the
    // part of each operation after the compute thread arrived here.
    t.exposed += thread_ ? std::max(0.0, end - std::max(start, done)) : end - start;
  }
  t.wait = comm_.wait_seconds() - wait_before_;
  t.slices = std::move(slices_);
  slices_ = {};
  return t;
}

}  // namespace ringtrain
