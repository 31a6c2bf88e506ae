// allreduce_sim: predicted all-reduce times from the algorithms' recorded schedules
// (src/collectives/sim; docs/collectives-simulator.md). One process, no MPI: the ranks are
// simulated.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "FlagRange.h"
#include "collectives/BenchRunner.h"
#include "collectives/CostModelFile.h"
#include "collectives/RabenseifnerAllreduce.h"
#include "collectives/sim/AllreducePredictor.h"

using namespace ringtrain;
using namespace ringtrain::sim;

namespace {

struct Options {
  int np = 8;
  int ranks_per_node = 1;
  std::string sizes = "64K,1M,16M,64M";
  std::string algos = "all";
  std::string compress = "none";
  std::string tuning;
  AllreduceCostModel model;
  NetworkParams extra;  // delay and shared memory (the rest comes from the model)
  double delay_us = 0;
  double link_gbit = 1;
  int rab_window = static_cast<int>(AllreduceTuning{}.rab_send_window);
  int rab_lanes = 0;
  bool scale_table = false;
  bool fidelity_grid = false;
  bool traffic = false;
  bool with_model = false;
  std::string scale_np;
  std::string scale_per_node;
};

void add_options(CLI::App& app, Options& o) {
  app.add_option("--np", o.np, "simulated ranks")->capture_default_str()->check(ringtrain::from_to(2, 65535));
  app.add_option("--ranks-per-node", o.ranks_per_node, "ranks r / this share a node (memory and a link)")
      ->capture_default_str()->check(ringtrain::from_to(1, 65535));
  app.add_option("--sizes", o.sizes, "comma list of fp32 vector sizes (K/M/G suffixes)")->capture_default_str();
  app.add_option("--algo", o.algos, "ring|hier|ps|rd|rab|auto|all or a comma list")->capture_default_str();
  app.add_option("--compress", o.compress, "none|bf16|fp16 (wire format)")->capture_default_str();
  app.add_option("--tuning", o.tuning, "tuning file (allreduce_bench --calibrate); default: built-in");
  app.add_option("--alpha-s", o.model.alpha_s, "network latency per message (s)");
  app.add_option("--beta-s-per-byte", o.model.beta_s_per_byte, "network link, per byte each direction, at 1 Gbit/s");
  app.add_option("--rendezvous-beta-s-per-byte", o.model.rendezvous_beta_s_per_byte, "the same above the eager limit");
  app.add_option("--gamma-s-per-byte", o.model.gamma_s_per_byte, "per byte of fp32 addition");
  app.add_option("--eager-limit-bytes", o.model.eager_limit_bytes, "largest eager network message");
  app.add_option("--shm-alpha-s", o.extra.shm_alpha_s, "latency between ranks of one node (s)")->capture_default_str();
  app.add_option("--shm-beta-s-per-byte", o.extra.shm_beta_s_per_byte, "copy time per byte within a node")
      ->capture_default_str();
  app.add_option("--delay-us", o.delay_us, "added one-way delay per network message (netem), us")->capture_default_str();
  app.add_option("--link-gbit", o.link_gbit, "link rate: beta / rate (the parameters are for 1 Gbit/s)")
      ->capture_default_str();
  app.add_option("--rab-window", o.rab_window,
                 "rab: chunks a rank sends ahead of its partner's in a round (0: all at once)")
      ->capture_default_str()->check(ringtrain::from_to(0, 1 << 20));
  app.add_option("--rab-lanes", o.rab_lanes,
                 "rab: lanes, parts of the vector run as rabs of their own at once (0: the cost model "
                 "chooses, with the model of the link rate)")
      ->capture_default_str()->check(ringtrain::from_to(0, kMaxRabLanes));
  app.add_flag("--scale-table", o.scale_table, "markdown table: 8-1024 ranks x {1,8} per node x 64 KiB-256 MiB x "
                                               "{1,10,100} Gbit/s, auto against the fastest and the bound");
  app.add_option("--scale-np", o.scale_np, "with --scale-table: comma list of rank counts instead");
  app.add_option("--scale-per-node", o.scale_per_node, "with --scale-table: comma list of ranks per node instead");
  app.add_flag("--fidelity-grid", o.fidelity_grid, "CSV predictions for the emulated-cluster grid the simulator's fidelity is measured on "
               "(docs/collectives-simulator.md)");
  app.add_flag("--with-model", o.with_model,
               "after each row, the cost model's prediction (us) of each ring, rd and rab column ('-' for "
               "the others), rab in its lanes: model against replay");
  app.add_flag("--traffic", o.traffic,
               "bytes and messages sent per (source, destination) rank of each algorithm and size");
}

std::vector<AllreduceAlgo> parse_algos(const Options& o, Compression compression) {
  if (o.algos == "all") {
    auto algos = simulated_algos(o.ranks_per_node, compression);
    algos.push_back(AllreduceAlgo::kAuto);
    return algos;
  }
  std::vector<AllreduceAlgo> algos;
  std::size_t start = 0;
  while (start <= o.algos.size()) {
    const std::size_t comma = std::min(o.algos.find(',', start), o.algos.size());
    algos.push_back(parse_allreduce_algo(o.algos.substr(start, comma - start)));
    if (algos.back() == AllreduceAlgo::kMpi) throw std::invalid_argument("--algo: mpi cannot be simulated");
    start = comma + 1;
  }
  return algos;
}

// The cost model's prediction of `algo` as recorded here (rab in the lanes it ran in), in
// us, or "-" where the model has none.
std::string model_us(const Options& o, const PredictSetup& setup, AllreduceAlgo algo, std::size_t bytes) {
  ModelLayout where;
  if (o.np % o.ranks_per_node == 0) where.ranks_per_node = o.ranks_per_node;
  where.chunk_bytes = setup.tuning.ring_chunk_bytes_network;
  where.rab_send_window = setup.tuning.rab_send_window;
  double seconds = 0.0;
  if (algo == AllreduceAlgo::kRabenseifner) {
    const int lanes = resolved_rab_lanes(request_for(algo, o.np, o.ranks_per_node, bytes, setup));
    if (lanes > 1 && where.ranks_per_node > 1) return "-";
    seconds = predict_rab_seconds(bytes, o.np, setup.compression, setup.model, where, lanes);
  } else if (algo == AllreduceAlgo::kRing ||
             (algo == AllreduceAlgo::kRecursiveDoubling && setup.compression == Compression::kNone)) {
    seconds = predict_allreduce_seconds(algo, bytes, o.np, setup.compression, setup.tuning.rd_doubling_max_bytes,
                                        setup.model, where);
  } else {
    return "-";
  }
  std::ostringstream text;
  text << std::fixed << std::setprecision(1) << seconds * 1e6;
  return text.str();
}

void print_predictions(const Options& o, const PredictSetup& setup, const NetworkParams& network) {
  const auto algos = parse_algos(o, setup.compression);
  std::cout << "# allreduce_sim: " << o.np << " ranks, " << o.ranks_per_node << " per node, " << o.link_gbit
            << " Gbit/s, delay " << o.delay_us << " us; predicted us per call\n# bytes";
  for (AllreduceAlgo a : algos) std::cout << ' ' << allreduce_algo_name(a);
  std::cout << "  auto_runs bound_us rab_lanes";
  if (o.with_model) {
    std::cout << "  model:";
    for (AllreduceAlgo a : algos) std::cout << ' ' << allreduce_algo_name(a);
  }
  std::cout << '\n';
  for (std::size_t bytes : parse_size_list(o.sizes)) {
    std::cout << bytes;
    AllreduceAlgo pick = AllreduceAlgo::kRing;
    for (AllreduceAlgo a : algos) {
      const Prediction p = predict(a, o.np, o.ranks_per_node, bytes, setup, {network});
      if (!p.exact && setup.compression == Compression::kNone)
        throw std::runtime_error("the recorded " + std::string(allreduce_algo_name(a)) + " run did not compute the exact sum");
      if (a == AllreduceAlgo::kAuto) pick = p.algo;
      std::cout << ' ' << std::fixed << std::setprecision(1) << p.seconds[0] * 1e6;
    }
    // rab_lanes: the lanes rab runs in here, forced or auto's (the same model choice).
    std::cout << "  " << allreduce_algo_name(resolved_algo(request_for(AllreduceAlgo::kAuto, o.np, o.ranks_per_node, bytes, setup)))
              << ' ' << bound_seconds(o.np, o.ranks_per_node, bytes, network) * 1e6 << ' '
              << resolved_rab_lanes(request_for(AllreduceAlgo::kRabenseifner, o.np, o.ranks_per_node, bytes, setup));
    if (o.with_model) {
      std::cout << "  model:";
      for (AllreduceAlgo a : algos) std::cout << ' ' << model_us(o, setup, a, bytes);
    }
    std::cout << '\n';
    (void)pick;
  }
}

void print_traffic(const Options& o, const PredictSetup& setup) {
  std::cout << "# algo bytes src dst sent_bytes messages\n";
  for (AllreduceAlgo a : parse_algos(o, setup.compression)) {
    for (std::size_t bytes : parse_size_list(o.sizes)) {
      const Recording r = record_allreduce(request_for(a, o.np, o.ranks_per_node, bytes, setup));
      const auto messages = messages_by_peer(r.schedule);
      for (const auto& [pair, sent] : traffic_by_peer(r.schedule))
        std::cout << allreduce_algo_name(a) << ' ' << bytes << ' ' << pair.first << ' ' << pair.second << ' ' << sent
                  << ' ' << messages.at(pair) << '\n';
    }
  }
}

int run(const Options& o) {
  PredictSetup setup;
  setup.compression = parse_compression(o.compress);
  setup.model = o.tuning.empty() ? o.model : read_cost_model(o.tuning);
  setup.tuning.rab_send_window = static_cast<std::size_t>(o.rab_window);
  setup.tuning.rab_lanes = o.rab_lanes;
  NetworkParams network = NetworkParams::from_cost_model(setup.model);
  network.shm_alpha_s = o.extra.shm_alpha_s;
  network.shm_beta_s_per_byte = o.extra.shm_beta_s_per_byte;
  if (o.fidelity_grid) {
    write_fidelity_grid(std::cout, setup, network);
  } else if (o.scale_table) {
    ScaleGrid grid;
    if (!o.scale_np.empty()) {
      grid.ranks.clear();
      for (std::size_t n : parse_size_list(o.scale_np)) grid.ranks.push_back(static_cast<int>(n));
    }
    if (!o.scale_per_node.empty()) {
      grid.ranks_per_node.clear();
      for (std::size_t n : parse_size_list(o.scale_per_node)) grid.ranks_per_node.push_back(static_cast<int>(n));
    }
    write_scale_table(std::cout, grid, setup, network);
  } else if (o.traffic) {
    print_traffic(o, setup);
  } else {
    network = at_link_rate(network, o.link_gbit);
    network.delay_s = o.delay_us * 1e-6;
    // auto's choice and rab's lanes by the model of this link rate, as calibrating on it
    // would give (the scale table does the same per row).
    setup.model.beta_s_per_byte /= o.link_gbit;
    setup.model.rendezvous_beta_s_per_byte /= o.link_gbit;
    print_predictions(o, setup, network);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"allreduce_sim: predicted all-reduce times from the algorithms' recorded send/receive schedules"};
  Options o;
  add_options(app, o);
  try {
    app.parse(argc, argv);
    if (o.link_gbit <= 0) throw std::invalid_argument("--link-gbit must be > 0");
    if (o.delay_us < 0) throw std::invalid_argument("--delay-us must be >= 0");
    for (std::size_t bytes : parse_size_list(o.sizes))
      if (bytes < sizeof(float) || bytes % sizeof(float) != 0)
        throw std::invalid_argument("--sizes: " + std::to_string(bytes) + " is not a positive multiple of 4 bytes");
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "allreduce_sim: usage error: %s (see --help)\n", e.what());
    return 2;
  }
  try {
    return run(o);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "allreduce_sim: usage error: %s (see --help)\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_sim: error: %s\n", e.what());
    return 1;
  }
}
