// Hierarchical all-reduce in two dimensions (see HierarchicalAllreduce.h).
//
// One call, with L ranks on the node, S slices (S <= L, the same on every node), the
// window's input segments in[0..L-1], the result segment and one counter `done[l]` per
// slice owner l < S, counting calls since the window was made:
//   1. every rank copies its vector into in[own rank] (a slice owner leaves out its own
//      slice, which it reads from its vector);                               barrier
//   2. owner l sums slice l over in[0..L-1] (in that order) into result, all-reduces it
//      with owner l of the other nodes over its cross communicator (ring, rd or rab,
//      MpiCommunicator::across_nodes: one collective over the whole slice), and advances
//      done[l]. The S owners do this at once, so their network phases share the link;
//   3. every rank copies the finished slices out of result as their owners finish, its
//      own slice first and the others in turn after it, so a copy overlaps the slower
//      owners' network phases (the previous hier copied the whole vector out at the end).
// Owners that finish early do not wait for one another. The counter waits sleep in the
// kernel (SharedCounter.h): a polling wait took CPU from the ranks still on the network
// (docs/benchmarks/allreduce-targets.md). No barrier is needed after 3: the next call
// writes in[own rank], which nobody reads once every done[l] has passed (a rank leaves
// only then), and result only after its own first barrier, which no rank passes before it
// has copied everything out. Counter stores and the window's MPI_Win_sync order the plain
// data in both C++'s and MPI-3's memory model (section 11.7 of the standard).
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

// Counters sit 64 bytes apart (a cache line each), ahead of node rank 0's input segment.
constexpr std::size_t kCounterStride = 64 / sizeof(float);

}  // namespace

HierarchicalAllreduce::HierarchicalAllreduce(MPI_Comm node_comm, MPI_Comm cross_comm, int slices)
    : node_comm_(node_comm), cross_comm_(cross_comm), slices_(slices) {
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(node_comm_, &node_rank_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(node_comm_, &node_size_));
  if (slices_ < 1 || slices_ > node_size_)
    throw std::invalid_argument("HierarchicalAllreduce: slices must be in [1, ranks on the node]");
  if (node_rank_ < slices_) {
    if (cross_comm_ == MPI_COMM_NULL)
      throw std::invalid_argument("HierarchicalAllreduce: a slice owner needs its cross-node communicator");
    RINGTRAIN_MPI_CHECK(MPI_Comm_size(cross_comm_, &nodes_));
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
  // Node rank 0's segment: the counters (done[0..S-1]), its input, the result.
  const std::size_t counters = kCounterStride * static_cast<std::size_t>(slices_);
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
  // Fresh counters: zero on node rank 0, seen by all before the first use.
  if (node_rank_ == 0) {
    for (int l = 0; l < slices_; ++l) SharedCounter(counter(l)).store(0);
  }
  calls_done_ = 0;
  node_barrier(stats);
}

std::uint32_t* HierarchicalAllreduce::counter(int owner) const {
  return counters_ + kCounterStride * static_cast<std::size_t>(owner);
}

void HierarchicalAllreduce::node_barrier(TrafficStats& stats) {
  RINGTRAIN_MPI_CHECK(MPI_Win_sync(window_));
  MPI_Request request;
  RINGTRAIN_MPI_CHECK(MPI_Ibarrier(node_comm_, &request));
  timed_wait(&request, stats);
  RINGTRAIN_MPI_CHECK(MPI_Win_sync(window_));
}

void HierarchicalAllreduce::wait_for(int owner, std::uint32_t target, TrafficStats& stats) {
  SharedCounter shared(counter(owner));
  if (static_cast<std::int32_t>(shared.load() - target) < 0) {
    const auto start = std::chrono::steady_clock::now();
    StallRecord::instance().begin_wait("node slice owner", StallRecord::kAllRanks, start);
    shared.wait_until(target);
    StallRecord::instance().end_wait();
    stats.wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  RINGTRAIN_MPI_CHECK(MPI_Win_sync(window_));
}

void HierarchicalAllreduce::own_slice(std::span<float> data, float scale, Compression compression,
                                      const AcrossNodes& across, std::uint32_t mark) {
  const std::size_t slices = static_cast<std::size_t>(slices_);
  const std::size_t l = static_cast<std::size_t>(node_rank_);
  const std::size_t begin = partition_begin(data.size(), slices, l);
  const std::size_t n = partition_size(data.size(), slices, l);
  float* sum = result_ + begin;
  // in[0] + in[1] + ... in node-rank order, this rank's own input read from its vector.
  const auto input = [&](int r) { return r == node_rank_ ? data.data() + begin : inputs_[r] + begin; };
  std::memcpy(sum, input(0), n * sizeof(float));
  for (int r = 1; r < node_size_; ++r) reduce_add(sum, input(r), n);
  // Every owner of slice l on every node has the same n: all skip an empty slice alike.
  if (n > 0 && nodes_ > 1) {
    across(std::span<float>(sum, n), scale, compression);
  } else if (scale != 1.0f) {
    scale_in_place(sum, n, scale);
  }
  RINGTRAIN_MPI_CHECK(MPI_Win_sync(window_));
  SharedCounter(counter(node_rank_)).store(mark);
}

void HierarchicalAllreduce::run(std::span<float> data, float scale, Compression compression,
                                const AcrossNodes& across, TrafficStats& stats) {
  const std::size_t count = data.size();
  if (node_size_ == 1) {
    // Alone on the node (so S = 1): the node sum is the vector itself.
    if (nodes_ > 1) {
      across(data, scale, compression);
    } else if (scale != 1.0f) {
      scale_in_place(data.data(), count, scale);
    }
    return;
  }
  reserve(count, stats);
  const bool owner = node_rank_ < slices_;
  const std::size_t slices = static_cast<std::size_t>(slices_);
  const auto begin_of = [&](int l) { return partition_begin(count, slices, static_cast<std::size_t>(l)); };
  const auto size_of = [&](int l) { return partition_size(count, slices, static_cast<std::size_t>(l)); };
  // Copy in; an owner's own slice stays in its vector (own_slice reads it there).
  float* in = inputs_[static_cast<std::size_t>(node_rank_)];
  if (owner) {
    const std::size_t b = begin_of(node_rank_);
    const std::size_t e = b + size_of(node_rank_);
    std::memcpy(in, data.data(), b * sizeof(float));
    std::memcpy(in + e, data.data() + e, (count - e) * sizeof(float));
  } else {
    std::memcpy(in, data.data(), count * sizeof(float));
  }
  node_barrier(stats);
  const std::uint32_t mark = ++calls_done_;
  if (owner) own_slice(data, scale, compression, across, mark);
  // Gather: own slice first (an owner's is done), then the next owners in turn, so the
  // ranks of a node do not all read the same slice at once.
  const int first = node_rank_ % slices_;
  for (int k = 0; k < slices_; ++k) {
    const int l = (first + k) % slices_;
    if (l != node_rank_) wait_for(l, mark, stats);
    std::memcpy(data.data() + begin_of(l), result_ + begin_of(l), size_of(l) * sizeof(float));
  }
}

}  // namespace ringtrain
