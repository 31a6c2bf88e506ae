// The process-wide stall record.
#include "collectives/StallRecord.h"

namespace ringtrain {

StallRecord& StallRecord::instance() noexcept {
  static StallRecord record;
  return record;
}

StallRecord::Snapshot StallRecord::snapshot() const noexcept {
  Snapshot s;
  const std::int64_t since = since_ns_.load(std::memory_order_acquire);
  s.waiting = since != 0;
  s.since = std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(since));
  s.serial = serial_.load(std::memory_order_relaxed);
  s.phase = phase_.load(std::memory_order_relaxed);
  s.operation = operation_.load(std::memory_order_relaxed);
  s.what = what_.load(std::memory_order_relaxed);
  s.peer = peer_.load(std::memory_order_relaxed);
  s.step = step_.load(std::memory_order_relaxed);
  s.bucket = bucket_.load(std::memory_order_relaxed);
  s.buckets = buckets_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace ringtrain
