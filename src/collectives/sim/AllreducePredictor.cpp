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

using AlgoTimes = std::vector<std::pair<AllreduceAlgo, std::vector<double>>>;

void write_scale_row(std::ostream& out, int ranks, int per_node, std::size_t bytes, double gbit,
                     const NetworkParams& network, const AlgoTimes& times, std::size_t n, AllreduceAlgo pick) {
  auto best = times.front();
  std::string all;
  for (const auto& t : times) {
    if (t.second[n] < best.second[n]) best = t;
    all += (all.empty() ? "" : ", ") + std::string(allreduce_algo_name(t.first)) + " " + micros(t.second[n]);
  }
  const auto chosen = std::find_if(times.begin(), times.end(), [&](const auto& t) { return t.first == pick; });
  const double bound = bound_seconds(ranks, per_node, bytes, network);
  const double auto_s = chosen->second[n];
  out << "| " << ranks << " | " << per_node << " | " << size_label(bytes) << " | " << gbit << " | "
      << allreduce_algo_name(pick) << " | " << micros(auto_s) << " | " << allreduce_algo_name(best.first) << " | "
      << micros(best.second[n]) << " | " << ratio(auto_s / best.second[n]) << " | " << micros(bound) << " | "
      << ratio(best.second[n] / bound) << " | " << ratio(auto_s / bound) << " | " << all << " |\n";
}

// One cell group of the scale table: every network for one (ranks, per node, size). Each
// algorithm is recorded once and replayed on every network (hier once per network choice).
void write_scale_rows(std::ostream& out, int ranks, int per_node, std::size_t bytes, const PredictSetup& setup,
                      const std::vector<NetworkParams>& networks, const std::vector<double>& gbits) {
  AlgoTimes times;
  for (AllreduceAlgo algo : simulated_algos(per_node, setup.compression)) {
    if (algo == AllreduceAlgo::kParameterServer) continue;  // ps: every byte through rank 0
    if (algo == AllreduceAlgo::kHierarchical) {
      times.emplace_back(algo, hier_seconds(ranks, per_node, bytes, setup, networks, gbits));
      continue;
    }
    times.emplace_back(algo, predict(algo, ranks, per_node, bytes, setup, networks).seconds);
  }
  for (std::size_t n = 0; n < networks.size(); ++n) {
    AllreduceAlgo pick = auto_pick(ranks, per_node, bytes, setup, gbits[n]);
    if (std::none_of(times.begin(), times.end(), [&](const auto& t) { return t.first == pick; }))
      times.emplace_back(pick, predict(pick, ranks, per_node, bytes, setup, networks).seconds);
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
