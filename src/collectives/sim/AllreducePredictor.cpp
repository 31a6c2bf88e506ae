// AllreducePredictor: recordings simulated on networks, and the tables built from them.
#include "collectives/sim/AllreducePredictor.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

namespace ringtrain::sim {
namespace {

int nodes_of(int ranks, int ranks_per_node) { return (ranks + ranks_per_node - 1) / ranks_per_node; }

std::string size_label(std::size_t bytes) {
  if (bytes >= (std::size_t{1} << 20) && bytes % (std::size_t{1} << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

std::string ratio(double x) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(2) << x;
  return text.str();
}

std::string micros(double seconds) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(seconds < 1e-3 ? 1 : 0) << seconds * 1e6;
  return text.str();
}

std::vector<std::size_t> default_scale_sizes() {
  std::vector<std::size_t> sizes;
  for (std::size_t b = std::size_t{64} << 10; b <= std::size_t{256} << 20; b *= 4) sizes.push_back(b);
  return sizes;
}

// The setup as calibration on a network of `gbit` Gbit/s would give it: both betas of the
// cost model divided by the rate, the rest unchanged.
PredictSetup setup_at_rate(PredictSetup setup, double gbit) {
  setup.model.beta_s_per_byte /= gbit;
  setup.model.rendezvous_beta_s_per_byte /= gbit;
  return setup;
}

// auto's choice on a network of `gbit` Gbit/s, by the cost model of that network.
AllreduceAlgo auto_pick(int ranks, int per_node, std::size_t bytes, const PredictSetup& setup, double gbit) {
  return resolved_algo(request_for(AllreduceAlgo::kAuto, ranks, per_node, bytes, setup_at_rate(setup, gbit)));
}

// hier's network phase as the code chooses it (plan_hier_network) for nodes of per_node ranks.
AllreduceAlgo hier_network_choice(int ranks, int per_node, std::size_t bytes, const PredictSetup& setup) {
  const std::size_t floats = bytes / sizeof(float);
  const auto slices = static_cast<std::size_t>(per_node);
  const std::size_t slice = (floats + slices - 1) / slices * sizeof(float);
  return plan_hier_network(slice, nodes_of(ranks, per_node), per_node, setup.compression,
                           setup.tuning.rd_doubling_max_bytes, setup.model, setup.tuning.ring_chunk_bytes_network)
      .algo;
}

// hier's recording depends on the model (its network phase is chosen by it), so it is
// recorded with each network's model, once per distinct network choice, and replayed on
// the networks that make that choice.
std::vector<double> hier_seconds(int ranks, int per_node, std::size_t bytes, const PredictSetup& setup,
                                 const std::vector<NetworkParams>& networks, const std::vector<double>& gbits) {
  std::vector<double> out(networks.size());
  std::map<AllreduceAlgo, std::vector<double>> by_choice;
  for (std::size_t i = 0; i < networks.size(); ++i) {
    const PredictSetup at_rate = setup_at_rate(setup, gbits[i]);
    const AllreduceAlgo choice = hier_network_choice(ranks, per_node, bytes, at_rate);
    auto it = by_choice.find(choice);
    if (it == by_choice.end())
      it = by_choice.emplace(choice, predict(AllreduceAlgo::kHierarchical, ranks, per_node, bytes, at_rate, networks).seconds)
               .first;
    out[i] = it->second[i];
  }
  return out;
}

// rab's lanes are chosen by the model too (choose_rab_lanes), so rab is recorded like hier:
// with each network's model, once per distinct lane count, replayed on the networks that
// choose it. Returns the seconds and the lanes per network.
std::pair<std::vector<double>, std::vector<int>> rab_seconds(int ranks, int per_node, std::size_t bytes,
                                                             const PredictSetup& setup,
                                                             const std::vector<NetworkParams>& networks,
                                                             const std::vector<double>& gbits) {
  std::vector<double> out(networks.size());
  std::vector<int> lanes(networks.size());
  std::map<int, std::vector<double>> by_lanes;
  for (std::size_t i = 0; i < networks.size(); ++i) {
    const PredictSetup at_rate = setup_at_rate(setup, gbits[i]);
    lanes[i] = resolved_rab_lanes(request_for(AllreduceAlgo::kRabenseifner, ranks, per_node, bytes, at_rate));
    auto it = by_lanes.find(lanes[i]);
    if (it == by_lanes.end())
      it = by_lanes.emplace(lanes[i], predict(AllreduceAlgo::kRabenseifner, ranks, per_node, bytes, at_rate, networks).seconds)
               .first;
    out[i] = it->second[i];
  }
  return {out, lanes};
}

// An algorithm's replayed times per network, and its name there ("rab xK" in K lanes).
struct AlgoTime {
  AllreduceAlgo algo;
  std::vector<double> seconds;
  std::vector<int> lanes;  // per network; empty: 1
  std::string label(std::size_t n) const {
    return allreduce_plan_label(AllreducePlan{algo, "", {}, lanes.empty() ? 1 : lanes[n]});
  }
};
using AlgoTimes = std::vector<AlgoTime>;

void write_scale_row(std::ostream& out, int ranks, int per_node, std::size_t bytes, double gbit,
                     const NetworkParams& network, const AlgoTimes& times, std::size_t n, AllreduceAlgo pick) {
  const AlgoTime* best = &times.front();
  std::string all;
  for (const AlgoTime& t : times) {
    if (t.seconds[n] < best->seconds[n]) best = &t;
    all += (all.empty() ? "" : ", ") + t.label(n) + " " + micros(t.seconds[n]);
  }
  const auto chosen = std::find_if(times.begin(), times.end(), [&](const AlgoTime& t) { return t.algo == pick; });
  const double bound = bound_seconds(ranks, per_node, bytes, network);
  const double auto_s = chosen->seconds[n];
  out << "| " << ranks << " | " << per_node << " | " << size_label(bytes) << " | " << gbit << " | "
      << chosen->label(n) << " | " << micros(auto_s) << " | " << best->label(n) << " | "
      << micros(best->seconds[n]) << " | " << ratio(auto_s / best->seconds[n]) << " | " << micros(bound) << " | "
      << ratio(best->seconds[n] / bound) << " | " << ratio(auto_s / bound) << " | " << all << " |\n";
}

// One cell group of the scale table: every network for one (ranks, per node, size). Each
// algorithm is recorded once and replayed on every network (hier once per network choice,
// rab once per lane count). auto's rab runs in rab's lanes: both are choose_rab_lanes for
// the network's model.
void write_scale_rows(std::ostream& out, int ranks, int per_node, std::size_t bytes, const PredictSetup& setup,
                      const std::vector<NetworkParams>& networks, const std::vector<double>& gbits) {
  AlgoTimes times;
  for (AllreduceAlgo algo : simulated_algos(per_node, setup.compression)) {
    if (algo == AllreduceAlgo::kParameterServer) continue;  // ps: every byte through rank 0
    if (algo == AllreduceAlgo::kHierarchical) {
      times.push_back({algo, hier_seconds(ranks, per_node, bytes, setup, networks, gbits), {}});
      continue;
    }
    if (algo == AllreduceAlgo::kRabenseifner) {
      auto [seconds, lanes] = rab_seconds(ranks, per_node, bytes, setup, networks, gbits);
      times.push_back({algo, std::move(seconds), std::move(lanes)});
      continue;
    }
    times.push_back({algo, predict(algo, ranks, per_node, bytes, setup, networks).seconds, {}});
  }
  for (std::size_t n = 0; n < networks.size(); ++n) {
    AllreduceAlgo pick = auto_pick(ranks, per_node, bytes, setup, gbits[n]);
    if (std::none_of(times.begin(), times.end(), [&](const AlgoTime& t) { return t.algo == pick; }))
      times.push_back({pick, predict(pick, ranks, per_node, bytes, setup, networks).seconds, {}});
    write_scale_row(out, ranks, per_node, bytes, gbits[n], networks[n], times, n, pick);
  }
}

}  // namespace

RecordRequest request_for(AllreduceAlgo algo, int ranks, int ranks_per_node, std::size_t bytes,
                          const PredictSetup& setup) {
  RecordRequest request;
  request.algo = algo;
  request.ranks = ranks;
  request.ranks_per_node = ranks_per_node;
  request.bytes = bytes;
  request.compression = setup.compression;
  request.tuning = setup.tuning;
  request.model = setup.model;
  request.max_recorded_bytes = setup.max_recorded_bytes;
  return request;
}

Prediction predict(AllreduceAlgo algo, int ranks, int ranks_per_node, std::size_t bytes, const PredictSetup& setup,
                   const std::vector<NetworkParams>& networks) {
  const Recording recording = record_allreduce(request_for(algo, ranks, ranks_per_node, bytes, setup));
  Prediction out;
  out.algo = recording.algo;
  out.rab_lanes = recording.rab_lanes;
  out.exact = recording.exact;
  out.scale = static_cast<std::size_t>(recording.schedule.byte_scale);
  for (const NetworkParams& network : networks) out.seconds.push_back(simulate(recording.schedule, network).seconds);
  return out;
}

std::vector<AllreduceAlgo> simulated_algos(int ranks_per_node, Compression compression) {
  std::vector<AllreduceAlgo> algos{AllreduceAlgo::kRing};
  if (compression == Compression::kNone) algos.push_back(AllreduceAlgo::kRecursiveDoubling);
  algos.push_back(AllreduceAlgo::kRabenseifner);
  algos.push_back(AllreduceAlgo::kParameterServer);
  if (ranks_per_node > 1) algos.push_back(AllreduceAlgo::kHierarchical);
  return algos;
}

double bound_seconds(int ranks, int ranks_per_node, std::size_t bytes, const NetworkParams& network) {
  const double m = nodes_of(ranks, ranks_per_node);
  const double latency = 2.0 * std::ceil(std::log2(static_cast<double>(ranks))) * (network.alpha_s + network.delay_s);
  const double transfer = 2.0 * (m - 1.0) / m * static_cast<double>(bytes) * network.beta_s_per_byte;
  return std::max(latency, transfer);
}

NetworkParams at_link_rate(NetworkParams calibrated_1gbit, double gbit) {
  calibrated_1gbit.beta_s_per_byte /= gbit;
  calibrated_1gbit.rendezvous_beta_s_per_byte /= gbit;
  return calibrated_1gbit;
}

std::map<std::pair<int, int>, std::uint64_t> traffic_by_peer(const Schedule& schedule) {
  std::map<std::pair<int, int>, std::uint64_t> out;
  for (int r = 0; r < schedule.ranks; ++r) {
    for (const Op& op : schedule.ops[static_cast<std::size_t>(r)]) {
      if (op.kind == OpKind::kSend)
        out[{r, op.peer}] += static_cast<std::uint64_t>(static_cast<double>(op.bytes) * schedule.byte_scale);
    }
  }
  return out;
}

std::map<std::pair<int, int>, std::uint64_t> messages_by_peer(const Schedule& schedule) {
  std::map<std::pair<int, int>, std::uint64_t> out;
  for (int r = 0; r < schedule.ranks; ++r)
    for (const Op& op : schedule.ops[static_cast<std::size_t>(r)])
      if (op.kind == OpKind::kSend) ++out[{r, op.peer}];
  return out;
}

void write_scale_table(std::ostream& out, const ScaleGrid& grid, const PredictSetup& setup,
                       const NetworkParams& calibrated_1gbit) {
  std::vector<NetworkParams> networks;
  for (double g : grid.gbits) networks.push_back(at_link_rate(calibrated_1gbit, g));
  const std::vector<std::size_t> sizes = grid.sizes.empty() ? default_scale_sizes() : grid.sizes;
  out << "| ranks | per node | size | Gbit/s | auto runs | auto (us) | fastest | fastest (us) | auto / fastest"
         " | bound (us) | fastest / bound | auto / bound | every algorithm (us) |\n"
      << "|---:|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---|\n";
  for (int per_node : grid.ranks_per_node) {
    for (int ranks : grid.ranks) {
      if (ranks < 2 * per_node) continue;  // at least two nodes
      for (std::size_t bytes : sizes) write_scale_rows(out, ranks, per_node, bytes, setup, networks, grid.gbits);
      out.flush();
    }
  }
}

void write_fidelity_grid(std::ostream& out, const PredictSetup& setup, const NetworkParams& calibrated) {
  const std::vector<std::pair<int, int>> layouts{{6, 1}, {8, 1}, {8, 2}, {8, 4}};  // ranks, per node
  const std::vector<double> delays_us{0, 250, 1000};
  std::vector<NetworkParams> networks;
  for (double d : delays_us) {
    NetworkParams n = calibrated;
    n.delay_s = d * 1e-6;
    networks.push_back(n);
  }
  out << "layout,ranks,ranks_per_node,delay_us,bytes,algo,predicted_us,auto_pick\n";
  for (const auto& [ranks, per_node] : layouts) {
    const std::string layout = std::to_string(ranks / per_node) + "x" + std::to_string(per_node);
    for (std::size_t bytes = std::size_t{64} << 10; bytes <= std::size_t{64} << 20; bytes *= 4) {
      const AllreduceAlgo pick = resolved_algo(request_for(AllreduceAlgo::kAuto, ranks, per_node, bytes, setup));
      for (AllreduceAlgo algo : simulated_algos(per_node, setup.compression)) {
        const Prediction p = predict(algo, ranks, per_node, bytes, setup, networks);
        for (std::size_t d = 0; d < delays_us.size(); ++d) {
          out << layout << ',' << ranks << ',' << per_node << ',' << static_cast<int>(delays_us[d]) << ',' << bytes << ','
              << allreduce_algo_name(algo) << ',' << std::fixed << std::setprecision(1) << p.seconds[d] * 1e6
              << ',' << (algo == pick ? 1 : 0) << '\n';
        }
      }
    }
  }
}

}  // namespace ringtrain::sim
