// An alpha-beta-gamma model of the hand-written all-reduce algorithms as they are coded,
// for ranks that talk over a network link each (docs/collectives-cost-model.md has the
// formulas, the parameters, how `allreduce_bench --calibrate` measures them and where the
// defaults come from), and the choice `auto` makes from it (AllreduceTuning.h says when).
#pragma once

#include <cstddef>
#include <string>

#include "collectives/Communicator.h"

namespace ringtrain {

struct AllreduceCostModel {
  // Seconds per round of messages: latency plus per-message overhead. 50 us: the emulated
  // 1 Gbit links' small calls on a quiet machine (allreduce-cluster-quiet.txt section 3,
  // 128 KB burst): the ring's 1 KiB call costs 24 / 45 / 60 us per round at 2 / 3 / 4 nodes,
  // rd's whole-vector doubling 21 / 30 / 56 us per round.
  double alpha_s = 50e-6;
  // Seconds per byte on one link, each direction at once, for messages below the eager
  // limit (the ring's and rab's chunks): 1 / 0.124 GB/s, the rate the ring and rab reached
  // from 1 MiB to 64 MiB on 2 emulated nodes (1 Gbit/s, MTU 1500; allreduce-rab.md).
  double beta_s_per_byte = 8.06e-9;
  // Seconds per byte of a message sent whole above the eager limit (rd's unpipelined
  // rounds): Open MPI's rendezvous handshake waits behind bulk data on the TCP connection
  // (allreduce-np2-investigation.md). 12.5 ns/B: rd's 2-node calls of 4-256 MiB
  // (allreduce-cluster-quiet.txt sections 1-2: 11.9-15.6 ns/B, one outlier at 8.4).
  double rendezvous_beta_s_per_byte = 12.5e-9;
  // Per byte of fp32 vector added (reduce_add); small next to beta on a network.
  double gamma_s_per_byte = 0.1e-9;
  // Seconds per byte of a copy within a node's memory: hier's copies into and out of its
  // shared window, and a message between two ranks of one node (the ring's and rab's steps
  // inside a node). 0.28 ns/B: the one-host record (allreduce-shared-memory.txt: the ring at
  // 4 ranks on one host moved 3.6 GB/s per rank at 16-256 MiB), the simulator's shared-memory
  // rate; a single rank's memcpy is faster (0.071 ns/B by --calibrate here), but a node's
  // ranks copy at once.
  double copy_s_per_byte = 0.28e-9;
  // Seconds of latency of a message between two ranks of one node: 2 us, the one-host
  // record's 1 KiB ring call (12.3 us over 6 steps), the simulator's shared-memory latency.
  double shm_alpha_s = 2e-6;
  // Largest message sent eagerly: Open MPI's btl_tcp_eager_limit default (64 KiB).
  double eager_limit_bytes = 65536;
  // auto takes the first of ring, rd, rab (the order of their measured record) whose
  // prediction is within this fraction of the fastest: the model's error on the record is
  // 3.5-6% at >= 1 MiB (allreduce-rab.md), so a smaller predicted gain is no reason to
  // leave a better-measured algorithm.
  double choice_margin = 0.05;
  // With several ranks per node, auto runs rab only when the model puts it more than this
  // fraction ahead of hier, else hier (AllreduceTuning.h). 0.10: at 4x2 and 2x4 emulated
  // nodes the model put rab 0.2-6.8% ahead, measured rab was 1.06-1.27x hier's time in all
  // 12 cells of the quiet fidelity run (docs/benchmarks/allreduce-sim-fidelity-measured.md):
  // the model's rab / hier is 8-30% low there (not isolated to one term; see
  // docs/collectives-cost-model.md, "Choice").
  double hier_margin = 0.10;
  // rab runs in several lanes only when the model puts them more than this fraction ahead
  // of one lane (choose_rab_lanes). 0.10: lanes have no measurement yet, and what they
  // save is alpha, which as calibrated is a round's latency and its per-message overhead;
  // lanes send up to k times the messages of one lane in the small rounds and overlap only
  // the latency. On the 2-4 node record's 1 Gbit links the model's largest lane gain (with a
  // lane's largest exchange at least one chunk) is 5.0% (4 nodes, 256 KiB), so those cells
  // run one lane, as measured; at the scale table's 10 and 100 Gbit/s cells that miss the
  // bound's 1.5x, lanes gain 15-25% (docs/collectives-cost-model.md, "rab in lanes").
  double lanes_margin = 0.10;
};

// Where the ranks of a prediction sit: `ranks_per_node` consecutive ranks share a node
// (memory between them, one link to the others), `link_share` such collectives run at once
// on every node's link (hier's slices), messages are pipelined in chunks of `chunk_bytes`
// on the wire (AllreduceTuning::ring_chunk_bytes_network, for the ring and rab).
struct ModelLayout {
  int ranks_per_node = 1;
  int link_share = 1;
  std::size_t chunk_bytes = 65408;
  // rab's send window in chunks (AllreduceTuning::rab_send_window; 0: none): rab runs in
  // several lanes only where a lane's largest exchange fits in it (choose_rab_lanes).
  std::size_t rab_send_window = 0;
};

// Predicted seconds of one all-reduce of `bytes` bytes of fp32 between `ranks` ranks placed
// node by node as `layout` says, with `compression` on the wire (16-bit halves the wire
// bytes). The formulas (docs/collectives-cost-model.md, "The model") follow the messages
// the code sends and what the simulator replays (docs/collectives-simulator.md): the ring
// as the larger of its chunk's latency chain and its busiest link or memory path, rab round
// by round (rounds inside a node through memory, across nodes on a link shared by the
// node's ranks), rd in whole messages with rendezvous handshakes above the eager limit.
// Throws std::invalid_argument for an algorithm the model does not cover (hier, ps, mpi,
// auto), ranks < 1, a layout field < 1, or rd with 16-bit transport.
double predict_allreduce_seconds(AllreduceAlgo algo, std::size_t bytes, int ranks,
                                 Compression compression, std::size_t doubling_max_bytes,
                                 const AllreduceCostModel& model, const ModelLayout& layout = {});

// hier's network phase (HierarchicalAllreduce.h): on every node, `slices` owners each
// all-reduce one slice of `slice_bytes` with their counterparts on the other `nodes` nodes,
// all at once, so the slices share each node's link: each collective is predicted for
// `nodes` ranks, one per node, with link_share = `slices`, and chosen among ring, rd and
// rab like choose_by_cost_model. nodes == 1: nothing crosses (the ring, 0 s).
AllreducePlan plan_hier_network(std::size_t slice_bytes, int nodes, int slices, Compression compression,
                                std::size_t doubling_max_bytes, const AllreduceCostModel& model,
                                std::size_t chunk_bytes = 65408);

// hier's predicted seconds for `bytes` bytes of fp32 between `nodes` nodes whose smallest
// holds `slices` ranks and largest `max_ranks_per_node` (L), with s = the largest slice
// (ceil(n / slices) rounded to whole floats):
//   2 n copy + (L - 1) s gamma + network(s)     [L > 1: copy in, owner's sum, copy out]
//   network(s)                                    [L = 1: the flat network collective]
// network(s): plan_hier_network's choice. The node barrier and the counter waits (a few
// microseconds in shared memory) are not modelled, nor the memory bandwidth the L ranks
// of a node share.
double predict_hier_seconds(std::size_t bytes, int nodes, int slices, int max_ranks_per_node,
                            Compression compression, std::size_t doubling_max_bytes,
                            const AllreduceCostModel& model, std::size_t chunk_bytes = 65408);

// rab with its vector in `lanes` lanes (RabenseifnerAllreduce.h). lanes = 1 is
// predict_allreduce_seconds's rab; lanes > 1 is modelled for one rank per node and one
// collective per link only (throws std::invalid_argument otherwise): a stage of x wire
// bytes per lane costs max(one lane's exchange of x, k x beta on the link)
// (docs/collectives-cost-model.md, "rab in lanes").
double predict_rab_seconds(std::size_t bytes, int ranks, Compression compression, const AllreduceCostModel& model,
                           const ModelLayout& layout, int lanes);
// Whether predict_rab_seconds covers `lanes` lanes in `layout`.
bool rab_lanes_modelled(const ModelLayout& layout, int lanes);

// The most lanes the model considers (powers of two up to it).
inline constexpr int kMaxModelRabLanes = 16;

// rab's lanes: 1 unless the fastest of 2, 4, ..., kMaxModelRabLanes is predicted more than
// lanes_margin ahead of one lane; then that fastest count. Only lane counts whose largest exchange is at least one chunk and fits
// in layout.rab_send_window compete. 1 with several ranks per node or a shared link (not
// modelled: there the node's ranks already overlap one's latency with another's transfer),
// and for one rank.
int choose_rab_lanes(std::size_t bytes, int ranks, Compression compression, const AllreduceCostModel& model,
                     const ModelLayout& layout);

// auto by the model: the predictions of ring, rd (fp32 only) and rab (with
// choose_rab_lanes' lanes, in plan.rab_lanes), in that order, and the first of them within
// (1 + choice_margin) of the fastest. The same inputs give the same choice on every rank
// (no clock, no randomness).
AllreducePlan choose_by_cost_model(std::size_t bytes, int ranks, Compression compression,
                                   std::size_t doubling_max_bytes, const AllreduceCostModel& model,
                                   const ModelLayout& layout = {});
// The first of plan.predicted_s (in order) within (1 + margin) of the fastest, into plan.algo.
void choose_within_margin(AllreducePlan& plan, double margin);

}  // namespace ringtrain
