// Tunable parameters of the hand-written all-reduce algorithms, where the ranks sit
// (NodeLayout), and the choice `auto` makes: by the cost model across nodes, by measured
// rules where the model does not apply (see AllreduceTuning.cpp).
#pragma once

#include <cstddef>

#include "collectives/AllreduceCostModel.h"
#include "collectives/Communicator.h"

namespace ringtrain {

struct AllreduceTuning {
  // Ring: the pipeline unit in bytes on the wire. On one host (shared memory) large
  // chunks cost least. Across hosts a chunk must stay below Open MPI's TCP eager limit
  // (btl_tcp_eager_limit, 64 KiB including the match header): larger messages use the
  // rendezvous protocol, whose handshake waits behind the bulk data on the TCP connection
  // and cost np 2 a third of the link (docs/benchmarks/allreduce-np2-investigation.md).
  std::size_t ring_chunk_bytes = 1024 * 1024;
  std::size_t ring_chunk_bytes_network = 65536 - 128;
  // Ring: receives posted ahead (2 = double-buffered receive).
  int ring_recv_depth = 2;
  // rab: chunks a rank sends ahead of what it has received from its partner in a round
  // (0: every chunk of a round at once). 16 (1 MiB of network chunks): on 8 emulated nodes
  // (1 Gbit/s, MTU 1500) rab took 0.84x at 16 MiB and 0.74-0.88x at 64 MiB of its time with
  // every chunk posted at once (docs/benchmarks/allreduce-sim-fidelity-measured.md, "8 nodes").
  std::size_t rab_send_window = 16;
  // rab: lanes, the parts of the vector that run as rabs of their own, all at once
  // (RabenseifnerAllreduce.h). 0: the cost model chooses (choose_rab_lanes: 1 on one host,
  // in hier's network phase and wherever more lanes do not pay); 1-kMaxRabLanes: forced
  // (allreduce_bench and allreduce_sim --rab-lanes, tests).
  int rab_lanes = 0;
  // Parameter server: rank 0 handles the gradient in chunks of this many bytes.
  std::size_t ps_chunk_bytes = 1024 * 1024;
  // rd: vectors up to this size use plain recursive doubling (whole vector, log2 p steps)
  // instead of Rabenseifner's halving-doubling (2 log2 p steps, half the bytes).
  std::size_t rd_doubling_max_bytes = 2 * 1024;
  // Measured crossover from `rd` to the ring on one host (shared memory; auto), see
  // AllreduceTuning.cpp. Across hosts auto and hier's network phase choose by the cost model.
  std::size_t auto_ring_min_bytes_single_host = 4 * 1024 * 1024;
};

// Where the ranks of a communicator run. Nodes are the groups of ranks that share memory
// (MPI_COMM_TYPE_SHARED), not host names: emulated nodes on one machine may all report
// the same name.
struct NodeLayout {
  int ranks = 1;
  int nodes = 1;
  int nodes_with_several_ranks = 0;
  // The smallest and largest node's rank count: hier cuts the vector into
  // min_ranks_per_node slices, one per local rank below it (HierarchicalAllreduce.h).
  int min_ranks_per_node = 1;
  int max_ranks_per_node = 1;
};

// What `auto` runs for a vector of `bytes` bytes, and why:
// - one rank: the ring (nothing moves);
// - one host: rd below auto_ring_min_bytes_single_host, the ring from it on (a rule: the
//   model describes network links, not ranks sharing cores and memory);
// - otherwise (several nodes): the cost model's choice among ring, rd and rab for
//   `layout.ranks` ranks placed node by node (choose_by_cost_model with model_layout), and,
//   when a node holds several ranks, hier (predict_hier_seconds) after them in the order
//   of preference; there rab is taken only when predicted more than hier_margin ahead of
//   hier (AllreduceCostModel.h), else hier.
// rd moves fp32 only, so with 16-bit transport it is never chosen.
// The layout the cost model predicts for: nodes of equal size hold ranks_per_node ranks
// each (the ring and rab order ranks node by node); unequal nodes are predicted as one
// rank per link (ranks_per_node 1). The chunk is the network chunk of the tuning.
ModelLayout model_layout(const NodeLayout& layout, const AllreduceTuning& tuning);

// The lanes rab runs in for a vector of `bytes` bytes: tuning.rab_lanes when > 0 (forced),
// else across nodes the model's choice (choose_rab_lanes for model_layout), else 1.
int plan_rab_lanes(std::size_t bytes, const NodeLayout& layout, Compression compression, const AllreduceTuning& tuning,
                   const AllreduceCostModel& model);

// tuning.rab_lanes > 0: rab runs with that many lanes whatever the model says; the plan's
// rab prediction becomes the one for those lanes (dropped where the model has no lanes:
// several ranks per node). The choice among algorithms was made with the model's lanes.
void force_rab_lanes(AllreducePlan& plan, std::size_t bytes, const NodeLayout& layout, Compression compression,
                     const AllreduceTuning& tuning, const AllreduceCostModel& model);

AllreducePlan plan_auto_allreduce(std::size_t bytes, const NodeLayout& layout,
                                  Compression compression, const AllreduceTuning& tuning,
                                  const AllreduceCostModel& model);

}  // namespace ringtrain
