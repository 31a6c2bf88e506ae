// Hierarchical all-reduce in two dimensions for several ranks per node (the scheme of
// Horovod's hierarchical all-reduce): the ranks of a node reduce-scatter
// their vectors through a shared-memory window into S slices, local rank l < S of every
// node all-reduces slice l with local rank l of the other nodes (S concurrent collectives
// over 1/S of the vector each, each one pipelined over its whole slice), and every rank of
// the node gathers the finished slices out of the window. Each node's link carries the
// vector once (2(M-1)/M of it for M nodes, split over S flows) instead of once per rank,
// and the network's latency is paid once per call, not per piece.
//
// S is the smallest number of ranks on any node, the same everywhere, so the slices are
// the same on every node also when nodes hold different numbers of ranks: a node's local
// ranks S and above add nothing to the network phase and only copy in and out.
#pragma once

#include "collectives/Mpi.h"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "collectives/Communicator.h"
#include "collectives/TrafficStats.h"

namespace ringtrain {

class HierarchicalAllreduce {
 public:
  // The all-reduce of one slice across nodes, over the cross communicator of the calling
  // rank: slice <- (sum over the nodes) * scale. Only called with more than one node.
  using AcrossNodes = std::function<void(std::span<float> slice, float scale, Compression)>;

  // node_comm: the ranks of this node. cross_comm: local rank l < slices of every node,
  // in node order (MPI_COMM_NULL on local ranks >= slices). slices: the smallest node's
  // rank count (every rank passes the same). Both communicators are borrowed and must
  // outlive this object.
  HierarchicalAllreduce(MPI_Comm node_comm, MPI_Comm cross_comm, int slices);
  ~HierarchicalAllreduce();
  HierarchicalAllreduce(const HierarchicalAllreduce&) = delete;
  HierarchicalAllreduce& operator=(const HierarchicalAllreduce&) = delete;

  // Collective over the whole communicator: data <- (sum over all ranks) * scale, the
  // same bits on every rank. `across` runs on the slice owners (local ranks < slices).
  // The intra-node sums are in fp32 in node-rank order; `compression` applies to the
  // network phase only.
  void run(std::span<float> data, float scale, Compression compression,
           const AcrossNodes& across, TrafficStats& stats);

  int slices() const { return slices_; }

 private:
  // (Re)allocates the shared window when `count` floats do not fit: every rank gets an
  // input segment; node rank 0's segment also holds the counters and the result.
  void reserve(std::size_t count, TrafficStats& stats);
  void release() noexcept;
  // Barrier over the node with the window's memory synchronised.
  void node_barrier(TrafficStats& stats);
  // Slice owner l's counter: the number of calls (since the window was made) whose slice
  // l is finished in the result segment.
  std::uint32_t* counter(int owner) const;
  // Waits until slice owner l's counter reaches `target` (see SharedCounter), then
  // synchronises the window's memory.
  void wait_for(int owner, std::uint32_t target, TrafficStats& stats);
  // Slice `slice` of this call: its node sum into the result segment (inputs in node-rank
  // order), then across the nodes, then marked done.
  void own_slice(std::span<float> data, float scale, Compression compression,
                 const AcrossNodes& across, std::uint32_t mark);

  MPI_Comm node_comm_;
  MPI_Comm cross_comm_;
  int node_rank_ = 0;
  int node_size_ = 1;
  int slices_ = 1;
  int nodes_ = 1;  // cross_comm_'s size, known on the slice owners
  MPI_Win window_ = MPI_WIN_NULL;
  std::size_t capacity_ = 0;     // floats per input segment
  std::vector<float*> inputs_;   // node rank j's input segment
  float* result_ = nullptr;      // the node sums, then the global result, slice by slice
  std::uint32_t* counters_ = nullptr;  // in node rank 0's segment, kCounterStride apart
  std::uint32_t calls_done_ = 0;       // calls since the window was made
};

}  // namespace ringtrain
