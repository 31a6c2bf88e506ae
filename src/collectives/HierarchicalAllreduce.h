// Hierarchical all-reduce for several ranks per node: the ranks of a node sum their
// vectors through a shared-memory window, the node leaders all-reduce the node sums
// across nodes (pipelined with the summing), and the result is copied back out of the window
// by every rank of the node. Each node's link then carries the vector once (2(M-1)/M of
// it for M nodes) instead of once per rank.
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
  // The leaders' all-reduce across nodes: data <- (sum over leaders) * scale.
  using AcrossNodes = std::function<void(std::span<float> data, float scale, Compression)>;

  // node_comm: the ranks of this node, whose rank 0 leads; leader_comm: the leaders
  // (MPI_COMM_NULL on the other ranks). Both are borrowed, and must outlive this object.
  // piece_bytes: the pipeline unit (the leaders' all-reduce of one piece overlaps the
  // node's additions of the next).
  HierarchicalAllreduce(MPI_Comm node_comm, MPI_Comm leader_comm, std::size_t piece_bytes);
  ~HierarchicalAllreduce();
  HierarchicalAllreduce(const HierarchicalAllreduce&) = delete;
  HierarchicalAllreduce& operator=(const HierarchicalAllreduce&) = delete;

  // Collective over the whole communicator: data <- (sum over all ranks) * scale, the
  // same bits on every rank. `across` runs on the leaders only. The intra-node sums are
  // in fp32 in node-rank order; `compression` applies to the leaders' transport.
  void run(std::span<float> data, float scale, Compression compression,
           const AcrossNodes& across, TrafficStats& stats);

 private:
  // (Re)allocates the shared window when `count` floats do not fit: every rank gets an
  // input segment, the leader a result segment after its own.
  void reserve(std::size_t count, TrafficStats& stats);
  void release() noexcept;
  // Barrier over the node with the window's memory synchronised.
  void node_barrier(TrafficStats& stats);
  // Node rank r's counter (0: the leader's `done`, h >= 1: helper h's `summed`).
  std::uint32_t* counter(int node_rank) const;
  // Waits until node rank r's counter reaches `target` (see SharedCounter), then
  // synchronises the window's memory.
  void wait_for(int node_rank, std::uint32_t target, TrafficStats& stats);

  MPI_Comm node_comm_;
  MPI_Comm leader_comm_;
  int node_rank_ = 0;
  int node_size_ = 1;
  std::size_t piece_elems_;
  int leaders_ = 1;  // leader_comm_'s size (the node count), known on the leaders
  MPI_Win window_ = MPI_WIN_NULL;
  std::size_t capacity_ = 0;     // floats per input segment
  std::vector<float*> inputs_;   // node rank j's input segment
  float* result_ = nullptr;      // the node sum, then the global result
  std::uint32_t* counters_ = nullptr;  // in the leader's segment, kCounterStride apart
  std::uint32_t pieces_done_ = 0;      // pieces of all calls since the window was made
};

}  // namespace ringtrain
