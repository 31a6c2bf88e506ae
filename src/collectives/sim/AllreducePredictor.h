// Predicted all-reduce times from recorded schedules (ScheduleRecorder) replayed on a
// simulated cluster (NetworkSimulator), and the tables allreduce_sim prints: per-algorithm
// predictions, the scale table of auto against the fastest algorithm and the bound, and the
// fidelity grid committed before measuring it (docs/collectives-simulator.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "collectives/AllreduceCostModel.h"
#include "collectives/AllreduceTuning.h"
#include "collectives/Communicator.h"
#include "collectives/sim/NetworkSimulator.h"
#include "collectives/sim/ScheduleRecorder.h"

namespace ringtrain::sim {

struct PredictSetup {
  AllreduceTuning tuning;
  AllreduceCostModel model;  // auto's choice; the network below is what the times come from
  Compression compression = Compression::kNone;
  std::size_t max_recorded_bytes = std::size_t{64} << 20;
};

struct Prediction {
  AllreduceAlgo algo = AllreduceAlgo::kRing;  // what ran (auto resolved)
  int rab_lanes = 1;                          // rab's lanes; 1 for other algorithms
  std::vector<double> seconds;                // one per network asked for
  bool exact = false;                         // the recorded run computed the exact sum
  std::size_t scale = 1;                      // recorded this many times smaller
};

// The recording request predict() makes.
RecordRequest request_for(AllreduceAlgo algo, int ranks, int ranks_per_node, std::size_t bytes,
                          const PredictSetup& setup);

// One recording of `algo`, simulated on each of `networks`.
Prediction predict(AllreduceAlgo algo, int ranks, int ranks_per_node, std::size_t bytes,
                   const PredictSetup& setup, const std::vector<NetworkParams>& networks);

// The algorithms worth comparing for a layout: ring, rd (fp32 only), rab, ps, and hier when
// nodes have several ranks.
std::vector<AllreduceAlgo> simulated_algos(int ranks_per_node, Compression compression);

// max(2 ceil(log2 p) alpha, 2 (M-1)/M n beta) for M = nodes: no all-reduce beats it (log2 p
// rounds each way, and every node's link carries 2 (M-1)/M of the vector), so auto is judged by it.
double bound_seconds(int ranks, int ranks_per_node, std::size_t bytes, const NetworkParams& network);

// A link of `gbit` Gbit/s from parameters calibrated on a 1 Gbit/s link: beta and the
// rendezvous beta divided by gbit; latency, gamma and shared memory unchanged.
NetworkParams at_link_rate(NetworkParams calibrated_1gbit, double gbit);

// Bytes sent per (source, destination) rank in one recorded call, scaled to its size.
std::map<std::pair<int, int>, std::uint64_t> traffic_by_peer(const Schedule& schedule);
// Messages (MPI_Isend calls) per (source, destination) rank in one recorded call.
std::map<std::pair<int, int>, std::uint64_t> messages_by_peer(const Schedule& schedule);

// Markdown: one row per (ranks, ranks per node, size, network): auto's pick and its time,
// the fastest algorithm, auto / fastest, the bound, fastest / bound, auto / bound.
struct ScaleGrid {
  std::vector<int> ranks{8, 16, 32, 64, 128, 256, 512, 1024};
  std::vector<int> ranks_per_node{1, 8};
  std::vector<std::size_t> sizes;  // empty: 64 KiB .. 256 MiB by 4x
  std::vector<double> gbits{1, 10, 100};
};
void write_scale_table(std::ostream& out, const ScaleGrid& grid, const PredictSetup& setup,
                       const NetworkParams& calibrated_1gbit);

// CSV (layout,ranks,ranks_per_node,delay_us,bytes,algo,predicted_us,auto_pick): the grid the
// simulator's fidelity is measured on (docs/collectives-simulator.md), 6 and 8 nodes with one rank each, 4x2 and 2x4, 64 KiB .. 64 MiB by 4x,
// netem delay 0, 250 us and 1 ms on every link.
void write_fidelity_grid(std::ostream& out, const PredictSetup& setup, const NetworkParams& calibrated);

}  // namespace ringtrain::sim
