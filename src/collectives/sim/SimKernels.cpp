// The simulator's versions of what the algorithms do to memory outside MPI, recorded as
// they run: the reduction kernels (ReduceKernels.h), hier's shared-memory counter
// (SharedCounter.h; a wait yields to the other fibers instead of sleeping in a futex) and
// hier's memcpy (SimHierarchicalAllreduce.cpp). The simulator links these instead of
// ReduceKernels.cpp and SharedCounter.cpp; the arithmetic is the same plain loops.
#include <atomic>
#include <cstring>

#include "collectives/ReduceKernels.h"
#include "collectives/SharedCounter.h"
#include "collectives/sim/SimRuntime.h"

using ringtrain::sim::Op;
using ringtrain::sim::OpKind;
using ringtrain::sim::SimRuntime;

namespace {

void record_bytes(OpKind kind, std::size_t bytes) {
  SimRuntime& runtime = SimRuntime::current();
  runtime.record({kind, -1, 0, bytes, 0});
}

// The counter's word as an atomic (the real SharedCounter does the same through
// std::atomic_ref); one thread runs every fiber, so relaxed order is enough.
std::atomic<std::uint32_t>& word_of(std::uint32_t* word) {
  return *reinterpret_cast<std::atomic<std::uint32_t>*>(word);
}

// A load or wait that saw the counter's value happens after the store that wrote it.
void record_await(const void* word) {
  SimRuntime& runtime = SimRuntime::current();
  const std::uint64_t signal = runtime.last_signal(word);
  if (signal != ringtrain::sim::kNoRequest) runtime.record({OpKind::kAwait, -1, 0, 0, signal});
}

}  // namespace

namespace ringtrain {

void reduce_add(float* __restrict dst, const float* __restrict src, std::size_t count) {
  record_bytes(OpKind::kReduce, count * sizeof(float));
  for (std::size_t i = 0; i < count; ++i) dst[i] += src[i];
}

void reduce_add_scale(float* __restrict dst, const float* __restrict src, std::size_t count, float scale) {
  record_bytes(OpKind::kReduce, count * sizeof(float));
  for (std::size_t i = 0; i < count; ++i) dst[i] = (dst[i] + src[i]) * scale;
}

void scale_in_place(float* dst, std::size_t count, float scale) {
  record_bytes(OpKind::kReduce, count * sizeof(float));
  for (std::size_t i = 0; i < count; ++i) dst[i] *= scale;
}

std::uint32_t SharedCounter::load() const noexcept {
  record_await(word_);
  return word_of(word_).load(std::memory_order_relaxed);
}

void SharedCounter::store(std::uint32_t value) noexcept {
  SimRuntime& runtime = SimRuntime::current();
  word_of(word_).store(value, std::memory_order_relaxed);
  runtime.record({OpKind::kSignal, -1, 0, 0, runtime.signal(word_)});
  runtime.wake(word_);
}

void SharedCounter::wait_until(std::uint32_t target) const noexcept {
  SimRuntime& runtime = SimRuntime::current();
  while (static_cast<std::int32_t>(word_of(word_).load(std::memory_order_relaxed) - target) < 0)
    runtime.block_on(word_);
  record_await(word_);
}

}  // namespace ringtrain

extern "C" void* ringtrain_sim_memcpy(void* dst, const void* src, std::size_t bytes) {
  record_bytes(OpKind::kCopy, bytes);
  return std::memmove(dst, src, bytes);
}
