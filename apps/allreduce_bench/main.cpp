// allreduce_bench: nccl-tests style all-reduce benchmark (ring, hier, mpi, ps, rd, rab, auto, with
// fp32 or 16-bit transport) with a correctness check at every size. Thin: parsing here,
// the work in collectives/BenchRunner.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "FlagRange.h"
#include "collectives/BenchRunner.h"
#include "collectives/CostCalibration.h"
#include "collectives/CostModelFile.h"
#include "collectives/MpiCommunicator.h"
#include "collectives/MpiEnvironment.h"
#include "collectives/RabenseifnerAllreduce.h"

namespace {

struct Options {
  std::string min_bytes = "4";
  std::string max_bytes = "256M";
  int step_factor = 2;
  std::string sizes;
  std::string algo = "all";
  int warmup = 5;
  int iters = 20;
  int repeats = 3;
  std::string compress = "none";
  double chunk_kb = 1024;
  double net_chunk_kb = (65536 - 128) / 1024.0;
  int recv_depth = 2;
  int rab_window = static_cast<int>(ringtrain::AllreduceTuning{}.rab_send_window);
  int rab_lanes = 0;
  double ps_chunk_kb = 1024;
  std::string auto_ring_min_shm = "4M";
  std::string rd_doubling_max = "2K";
  bool mean = false;
  bool predict = false;
  std::string tuning;
  std::string calibrate;
  ringtrain::AllreduceCostModel model;
  std::string csv;
  std::string json;
};

ringtrain::BenchConfig make_config(const Options& o) {
  ringtrain::BenchConfig config;
  config.sizes = o.sizes.empty()
                     ? ringtrain::stepped_sizes(ringtrain::parse_byte_size(o.min_bytes),
                                                ringtrain::parse_byte_size(o.max_bytes),
                                                o.step_factor)
                     : ringtrain::parse_size_list(o.sizes);
  config.algos = ringtrain::parse_algo_list(o.algo);
  config.compressions = ringtrain::parse_compression_list(o.compress);
  for (auto a : config.algos) {
    if (a == ringtrain::AllreduceAlgo::kMpi && config.algos.size() > 1)
      config.compare_to_mpi = true;
  }
  config.warmup = o.warmup;
  config.iters = o.iters;
  config.repeats = o.repeats;
  config.mean = o.mean;
  if (o.chunk_kb <= 0 || o.net_chunk_kb <= 0 || o.ps_chunk_kb <= 0)
    throw std::invalid_argument("chunk sizes must be positive");
  config.tuning.ring_chunk_bytes = static_cast<std::size_t>(o.chunk_kb * 1024);
  config.tuning.ring_chunk_bytes_network = static_cast<std::size_t>(o.net_chunk_kb * 1024);
  config.tuning.ring_recv_depth = o.recv_depth;
  config.tuning.rab_send_window = static_cast<std::size_t>(o.rab_window);
  config.tuning.rab_lanes = o.rab_lanes;
  config.tuning.ps_chunk_bytes = static_cast<std::size_t>(o.ps_chunk_kb * 1024);
  config.tuning.auto_ring_min_bytes_single_host = ringtrain::parse_byte_size(o.auto_ring_min_shm);
  config.tuning.rd_doubling_max_bytes = ringtrain::parse_byte_size(o.rd_doubling_max);
  return config;
}

// Short options after nccl-tests: -b -e -f -n -w.
void add_options(CLI::App& app, Options& o) {
  app.add_option("-b,--min-bytes", o.min_bytes, "smallest size (K/M/G suffixes)")
      ->capture_default_str();
  app.add_option("-e,--max-bytes", o.max_bytes, "largest size")->capture_default_str();
  app.add_option("-f,--step-factor", o.step_factor,
                 "sizes grow by this factor from --min-bytes")
      ->capture_default_str()
      ->check(ringtrain::from_to(2, 1024));
  app.add_option("--sizes", o.sizes, "explicit comma list of sizes instead, e.g. 1K,1M,64M");
  app.add_option("--algo", o.algo, "ring|hier|mpi|ps|rd|rab|auto|all or a comma list")
      ->capture_default_str();
  app.add_option("--compress", o.compress,
                 "transport: none|bf16|fp16 or a comma list (each algorithm runs with each; "
                 "mpi and rd move fp32 only)")
      ->capture_default_str();
  app.add_option("-w,--warmup", o.warmup, "untimed calls per size and algorithm")
      ->capture_default_str()
      ->check(ringtrain::from_to(0, 1000000));
  app.add_option("-n,--iters", o.iters, "timed calls per size and algorithm")
      ->capture_default_str()
      ->check(ringtrain::from_to(1, 1000000));
  app.add_option("--repeats", o.repeats, "timed loops per algorithm, taken in turns; best counts")
      ->capture_default_str()
      ->check(ringtrain::from_to(1, 1000000));
  app.add_flag("--mean", o.mean, "check and time the mean (sum * 1/N) variant");
  app.add_flag("--predict", o.predict,
               "after the table, the cost model's time for each ring/rab/rd row beside the "
               "measured one (one rank per node assumed)");
  auto* tuning = app.add_option("--tuning", o.tuning,
                                "cost model parameters from this file (as --calibrate writes it; "
                                "read on every rank, which must all read the same values); auto "
                                "and --predict use them");
  app.add_option("--calibrate", o.calibrate,
                 "measure the cost model's parameters first (ping-pong and two-way stream "
                 "between rank 0 and the last rank of the node order, reduction and memory "
                 "copy on rank 0), write them "
                 "to this file and use them for auto and --predict")
      ->excludes(tuning);
  app.add_option("--alpha-s", o.model.alpha_s, "cost model: seconds per round")
      ->capture_default_str()
      ->check(ringtrain::at_least(0));
  app.add_option("--beta-s-per-byte", o.model.beta_s_per_byte,
                 "cost model: seconds per byte on a link, each direction")
      ->capture_default_str()
      ->check(ringtrain::at_least(0));
  app.add_option("--gamma-s-per-byte", o.model.gamma_s_per_byte,
                 "cost model: seconds per byte of fp32 addition")
      ->capture_default_str()
      ->check(ringtrain::at_least(0));
  app.add_option("--copy-s-per-byte", o.model.copy_s_per_byte,
                 "cost model: seconds per byte of a memory copy within a node (hier's window, "
                 "messages between a node's ranks)")
      ->capture_default_str()
      ->check(ringtrain::at_least(0));
  app.add_option("--rendezvous-beta-s-per-byte", o.model.rendezvous_beta_s_per_byte,
                 "cost model: seconds per byte of a message sent whole above the eager limit")
      ->capture_default_str()
      ->check(ringtrain::at_least(0));
  app.add_option("--eager-limit-bytes", o.model.eager_limit_bytes,
                 "cost model: largest message sent eagerly (btl_tcp_eager_limit)")
      ->capture_default_str()
      ->check(ringtrain::at_least(0));
  app.add_option("--choice-margin", o.model.choice_margin,
                 "cost model: auto takes the first of ring, rd, rab (hier when a node holds several "
                 "ranks) predicted within this "
                 "fraction of the fastest")
      ->capture_default_str()
      ->check(ringtrain::at_least(0));
  app.add_option("--hier-margin", o.model.hier_margin,
                 "cost model: with several ranks per node, auto runs rab only when predicted more than "
                 "this fraction ahead of hier")
      ->capture_default_str()
      ->check(ringtrain::at_least(0));
  app.add_option("--csv", o.csv, "also write the results as CSV");
  app.add_option("--json", o.json, "also write the results as JSON");
}

void add_tuning_options(CLI::App& app, Options& o) {
  app.add_option("--chunk-kb", o.chunk_kb, "ring pipeline chunk on one host (KiB on the wire)")
      ->capture_default_str();
  app.add_option("--net-chunk-kb", o.net_chunk_kb,
                 "ring pipeline chunk across hosts (KiB on the wire; keep it below "
                 "btl_tcp_eager_limit)")
      ->capture_default_str();
  app.add_option("--recv-depth", o.recv_depth, "ring receives posted ahead")
      ->capture_default_str()
      ->check(ringtrain::from_to(1, 64));
  app.add_option("--rab-window", o.rab_window,
                 "rab: chunks a rank sends ahead of its partner's in a round (0: all at once)")
      ->capture_default_str()
      ->check(ringtrain::from_to(0, 1 << 20));
  app.add_option("--rab-lanes", o.rab_lanes,
                 "rab: lanes, parts of the vector run as rabs of their own at once (0: the cost "
                 "model chooses, 1 on one host; auto's rab too)")
      ->capture_default_str()
      ->check(ringtrain::from_to(0, ringtrain::kMaxRabLanes));
  app.add_option("--ps-chunk-kb", o.ps_chunk_kb, "parameter-server chunk (KiB)")
      ->capture_default_str();
  app.add_option("--auto-ring-min-shm", o.auto_ring_min_shm,
                 "auto on one host: ring from this size on")
      ->capture_default_str();
  app.add_option("--rd-doubling-max", o.rd_doubling_max,
                 "rd: whole-vector doubling up to this size")
      ->capture_default_str();
}

// Rank 0's two header lines: the job, what auto runs, and the settings.
void print_header(const ringtrain::MpiCommunicator& comm, const std::vector<std::string>& hosts,
                  const Options& o) {
  std::string host_list;
  for (const auto& h : hosts) host_list += (host_list.empty() ? "" : ",") + h;
  const auto& layout = comm.layout();
  std::string choices;
  for (const std::size_t bytes : {std::size_t{4} << 10, std::size_t{64} << 10, std::size_t{1} << 20,
                                  std::size_t{64} << 20}) {
    const auto plan = comm.plan_allreduce(ringtrain::AllreduceAlgo::kAuto, bytes,
                                          ringtrain::Compression::kNone);
    choices += (choices.empty() ? "" : ", ") + std::to_string(bytes >> 10) + "K " +
               ringtrain::allreduce_plan_label(plan);
    if (bytes == (std::size_t{64} << 20)) choices += " (" + plan.basis + ")";
  }
  std::cout << "# allreduce_bench: " << comm.size() << " ranks, " << comm.library_version()
            << ", hosts " << host_list << " (MPI_COMM_TYPE_SHARED: " << layout.nodes
            << " node(s), " << layout.nodes_with_several_ranks << " with several ranks; auto runs "
            << choices << ")"
            << "\n# ring chunk " << (comm.single_host() ? o.chunk_kb : o.net_chunk_kb) << " KiB x"
            << o.recv_depth << ", rab window " << o.rab_window << ", rab lanes "
            << (o.rab_lanes == 0 ? std::string("by the model") : std::to_string(o.rab_lanes))
            << ", transport " << o.compress
            << ", warmup " << o.warmup
            << ", iters " << o.iters << " x best of " << o.repeats << ", op "
            << (o.mean ? "mean" : "sum")
            << ", GB = 1e9 B, busbw = algbw * 2(N-1)/N, times per call averaged over iters\n";
}

// The --predict block: model against measurement, row by row.
void print_predictions(const std::vector<ringtrain::BenchRow>& rows, int ranks,
                       const ringtrain::BenchConfig& config, const Options& o) {
  std::cout << "# cost model (alpha " << o.model.alpha_s << " s, beta " << o.model.beta_s_per_byte
            << " s/B, rendezvous beta " << o.model.rendezvous_beta_s_per_byte << " s/B above "
            << o.model.eager_limit_bytes << " B, gamma " << o.model.gamma_s_per_byte
            << " s/B), one rank per node:\n"
            << "#     size(B)      algo  predicted(us)   measured(us)   error\n";
  for (const auto& p : ringtrain::predict_bench_rows(rows, ranks,
                                                     config.tuning.rd_doubling_max_bytes, o.model)) {
    std::printf("# %12zu %9s %14.1f %14.1f %+6.1f%%\n", p.bytes, p.algo.c_str(), p.predicted_us,
                p.measured_us, 100 * p.error);
  }
  std::fflush(stdout);
}

void calibrate(ringtrain::MpiCommunicator& comm, Options& o) {
  o.model = ringtrain::calibrate_cost_model(comm, o.model);
  comm.set_cost_model(o.model);
  if (comm.rank() != 0) return;
  const std::string note = "allreduce_bench --calibrate, " + std::to_string(comm.size()) +
                           " ranks, " + std::to_string(comm.layout().nodes) + " node(s)";
  ringtrain::write_cost_model(o.model, o.calibrate, note);
  std::cout << "# calibrated (" << o.calibrate << "): alpha " << o.model.alpha_s << " s, beta "
            << o.model.beta_s_per_byte << " s/B, rendezvous beta "
            << o.model.rendezvous_beta_s_per_byte << " s/B, gamma " << o.model.gamma_s_per_byte
            << " s/B\n";
}

// Parses the command line into `config`; returns an exit code to end with (help: 0, usage
// error: 2) or -1 to go on. The tuning file is read later, on every rank (main).
int parse(int argc, char** argv, int rank, Options& o, ringtrain::BenchConfig& config) {
  CLI::App app{"allreduce_bench: all-reduce bandwidth and latency (nccl-tests style)"};
  add_options(app, o);
  add_tuning_options(app, o);
  try {
    app.parse(argc, argv);
    config = make_config(o);
  } catch (const CLI::CallForHelp&) {
    if (rank == 0) std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    if (rank == 0)
      std::fprintf(stderr, "allreduce_bench: usage error: %s (see --help)\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    if (rank == 0)
      std::fprintf(stderr, "allreduce_bench: usage error: %s (see --help)\n", e.what());
    return 2;
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  ringtrain::MpiEnvironment env(argc, argv);
  int rank = 0;
  try {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    Options o;
    ringtrain::BenchConfig config;
    if (const int code = parse(argc, argv, rank, o, config); code >= 0) return code;

    ringtrain::MpiCommunicatorOptions options;
    options.tuning = config.tuning;
    options.cost_model = o.model;
    auto comm = std::make_unique<ringtrain::MpiCommunicator>(MPI_COMM_WORLD, options);
    if (!o.tuning.empty()) {
      try {
        o.model = ringtrain::read_cost_model_everywhere(*comm, o.tuning);
      } catch (const std::runtime_error& e) {
        // Every rank has the same message and leaves with it: no rank is left waiting.
        std::fprintf(stderr, "allreduce_bench: [rank %d] error: %s\n", rank, e.what());
        return 1;
      }
      comm->set_cost_model(o.model);
    }
    const auto hosts = comm->allgather(comm->host_name());
    if (!o.calibrate.empty()) calibrate(*comm, o);
    if (rank == 0) print_header(*comm, hosts, o);
    const auto rows = ringtrain::run_allreduce_bench(*comm, config, &std::cout);
    std::uint64_t errors = 0;
    for (const auto& r : rows) errors += r.errors;
    if (rank == 0) {
      if (o.predict) print_predictions(rows, comm->size(), config, o);
      if (!o.csv.empty()) ringtrain::write_bench_csv(rows, comm->size(), o.csv);
      if (!o.json.empty())
        ringtrain::write_bench_json(rows, comm->size(), comm->library_version(), config, o.json);
      std::cout << "# errors: " << errors << (errors ? "  (MISMATCH)" : "  (all sizes correct)")
                << "\n";
    }
    comm->barrier();
    return errors ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_bench: [rank %d] error: %s\n", rank, e.what());
    ringtrain::MpiEnvironment::abort(1);
  }
}
