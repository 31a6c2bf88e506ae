// Hierarchical all-reduce (see HierarchicalAllreduce.h).
//
// One call, with L ranks on the node, the window's input segments in[0..L-1], the result
// segment and the counters (SharedCounter.h) `summed[h]` of each helper h = 1..L-1 and
// `done` of the leader, all counting pieces since the window was made:
//   1. every rank copies its vector into in[own rank];                       barrier
//   2. the helpers (ranks 1..L-1) sum piece k over in[0..L-1] (in that order, each its
//      share of the piece) into result and advance summed[h]; the leader waits for piece
//      k's summed counters, all-reduces piece k of result with the other leaders and
//      advances done. So the additions of piece k+1 run while piece k crosses the
//      network;
//   3. each helper copies piece k out of result once done has passed it, while the
//      leader is already sending the next; the leader copies the result out at the end.
// The waits for counters sleep in the kernel: the helpers wait through the whole network
// phase, and a polling wait there took CPU from the leader and the kernel's packet work
// (measured in docs/benchmarks/allreduce-targets.md). No barrier is needed after 3: the
// next call writes in[own rank], which nobody reads once the leader has passed the last
// summed counter, and writes result only after its own first barrier, which no helper
// passes before it has copied everything out. Counter stores and the window's
// MPI_Win_sync order the plain data in both C++'s and MPI-3's memory model (section 11.7
// of the standard for shared windows).
#include "collectives/HierarchicalAllreduce.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "collectives/EvenPartition.h"
#include "collectives/MpiCheck.h"
#include "collectives/MpiWait.h"
#include "collectives/ReduceKernels.h"
#include "collectives/SharedCounter.h"
#include "collectives/StallRecord.h"

namespace ringtrain {
namespace {

// Counters sit 64 bytes apart (a cache line each), ahead of the leader's input segment.
constexpr std::size_t kCounterStride = 64 / sizeof(float);

}  // namespace

HierarchicalAllreduce::HierarchicalAllreduce(MPI_Comm node_comm, MPI_Comm leader_comm,
                                             std::size_t piece_bytes)
    : node_comm_(node_comm),
      leader_comm_(leader_comm),
      piece_elems_(std::max<std::size_t>(1, piece_bytes / sizeof(float))) {
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(node_comm_, &node_rank_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(node_comm_, &node_size_));
  if (node_rank_ == 0) {
    if (leader_comm_ == MPI_COMM_NULL)
      throw std::invalid_argument("HierarchicalAllreduce: a node leader needs the leader communicator");
    RINGTRAIN_MPI_CHECK(MPI_Comm_size(leader_comm_, &leaders_));
  }
}

HierarchicalAllreduce::~HierarchicalAllreduce() { release(); }

void HierarchicalAllreduce::release() noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (window_ != MPI_WIN_NULL && !finalized) {
    MPI_Win_unlock_all(window_);
    MPI_Win_free(&window_);
  }
  window_ = MPI_WIN_NULL;
  capacity_ = 0;
  inputs_.clear();
  result_ = nullptr;
  counters_ = nullptr;
}

void HierarchicalAllreduce::reserve(std::size_t count, TrafficStats& stats) {
  if (count <= capacity_ && window_ != MPI_WIN_NULL) return;
  // Every rank of the node passes the same count, so all take this collective branch.
  release();
  // Room to grow a little, so slowly growing sizes do not reallocate every call.
  const std::size_t floats = std::max<std::size_t>(count + count / 8, 1024);
  // The leader's segment: the counters (done, then summed[1..L-1]), its input, the result.
  const std::size_t counters = kCounterStride * static_cast<std::size_t>(node_size_);
  const std::size_t mine = node_rank_ == 0 ? counters + 2 * floats : floats;
  float* base = nullptr;
  RINGTRAIN_MPI_CHECK(MPI_Win_allocate_shared(static_cast<MPI_Aint>(mine * sizeof(float)),
                                              sizeof(float), MPI_INFO_NULL, node_comm_, &base,
                                              &window_));
  RINGTRAIN_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, window_));
  inputs_.assign(static_cast<std::size_t>(node_size_), nullptr);
  for (int r = 0; r < node_size_; ++r) {
    MPI_Aint size = 0;
    int unit = 0;
    void* pointer = nullptr;
    RINGTRAIN_MPI_CHECK(MPI_Win_shared_query(window_, r, &size, &unit, &pointer));
    inputs_[static_cast<std::size_t>(r)] = static_cast<float*>(pointer);
  }
  counters_ = reinterpret_cast<std::uint32_t*>(inputs_[0]);
  inputs_[0] += counters;
  result_ = inputs_[0] + floats;
  capacity_ = floats;
  // Fresh counters: zero on the leader, seen by all before the first use.
  if (node_rank_ == 0) {
    for (int r = 0; r < node_size_; ++r) SharedCounter(counter(r)).store(0);
  }
  pieces_done_ = 0;
  node_barrier(stats);
}

std::uint32_t* HierarchicalAllreduce::counter(int node_rank) const {
  return counters_ + kCounterStride * static_cast<std::size_t>(node_rank);
}

void HierarchicalAllreduce::node_barrier(TrafficStats& stats) {
  RINGTRAIN_MPI_CHECK(MPI_Win_sync(window_));
  MPI_Request request;
  RINGTRAIN_MPI_CHECK(MPI_Ibarrier(node_comm_, &request));
  timed_wait(&request, stats);
  RINGTRAIN_MPI_CHECK(MPI_Win_sync(window_));
}

void HierarchicalAllreduce::wait_for(int node_rank, std::uint32_t target, TrafficStats& stats) {
  SharedCounter shared(counter(node_rank));
  if (static_cast<std::int32_t>(shared.load() - target) < 0) {
    const auto start = std::chrono::steady_clock::now();
    StallRecord::instance().begin_wait(node_rank == 0 ? "node leader" : "node helper",
                                       StallRecord::kAllRanks, start);
    shared.wait_until(target);
    StallRecord::instance().end_wait();
    stats.wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  RINGTRAIN_MPI_CHECK(MPI_Win_sync(window_));
}

void HierarchicalAllreduce::run(std::span<float> data, float scale, Compression compression,
                                const AcrossNodes& across, TrafficStats& stats) {
  const std::size_t count = data.size();
  const std::size_t piece = std::max<std::size_t>(1, piece_elems_);
  const std::size_t pieces = (count + piece - 1) / piece;
  const auto piece_size = [&](std::size_t k) { return std::min(piece, count - k * piece); };
  if (node_size_ == 1) {
    // Alone on the node: the node sum is the vector itself. The leaders' all-reduces go
    // piece by piece on every node, so that they match those of the other leaders.
    for (std::size_t k = 0; k < pieces; ++k) {
      const std::span<float> part(data.data() + k * piece, piece_size(k));
      if (leaders_ > 1) {
        across(part, scale, compression);
      } else if (scale != 1.0f) {
        scale_in_place(part.data(), part.size(), scale);
      }
    }
    return;
  }
  reserve(count, stats);
  std::memcpy(inputs_[static_cast<std::size_t>(node_rank_)], data.data(), count * sizeof(float));
  node_barrier(stats);
  // Piece k of this call is number base + k + 1 on the counters (modulo 2^32).
  const std::uint32_t base = pieces_done_;
  pieces_done_ += static_cast<std::uint32_t>(pieces);
  const auto mark = [&](std::size_t k) { return base + static_cast<std::uint32_t>(k + 1); };

  if (node_rank_ == 0) {
    SharedCounter done(counter(0));
    for (std::size_t k = 0; k < pieces; ++k) {
      for (int h = 1; h < node_size_; ++h) wait_for(h, mark(k), stats);
      const std::span<float> part(result_ + k * piece, piece_size(k));
      if (leaders_ > 1) {
        across(part, scale, compression);
      } else if (scale != 1.0f) {
        scale_in_place(part.data(), part.size(), scale);
      }
      RINGTRAIN_MPI_CHECK(MPI_Win_sync(window_));
      done.store(mark(k));
    }
    std::memcpy(data.data(), result_, count * sizeof(float));
    return;
  }
  // The helpers share each piece's additions, in input order 0..L-1 for every element
  // whoever adds it, and run ahead of the leader's network phase.
  SharedCounter summed(counter(node_rank_));
  const std::size_t helpers = static_cast<std::size_t>(node_size_ - 1);
  const std::size_t helper = static_cast<std::size_t>(node_rank_ - 1);
  for (std::size_t k = 0; k < pieces; ++k) {
    const std::size_t begin = k * piece + partition_begin(piece_size(k), helpers, helper);
    const std::size_t n = partition_size(piece_size(k), helpers, helper);
    std::memcpy(result_ + begin, inputs_[0] + begin, n * sizeof(float));
    for (std::size_t r = 1; r < static_cast<std::size_t>(node_size_); ++r)
      reduce_add(result_ + begin, inputs_[r] + begin, n);
    RINGTRAIN_MPI_CHECK(MPI_Win_sync(window_));
    summed.store(mark(k));
  }
  for (std::size_t k = 0; k < pieces; ++k) {
    wait_for(0, mark(k), stats);
    std::memcpy(data.data() + k * piece, result_ + k * piece, piece_size(k) * sizeof(float));
  }
}

}  // namespace ringtrain
