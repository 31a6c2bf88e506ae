// BenchRunner: size parsing, the timed loop and the table / CSV / JSON output of
// allreduce_bench.
#include "collectives/BenchRunner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <ostream>
#include <stdexcept>

namespace ringtrain {

std::size_t parse_byte_size(std::string_view text) {
  if (text.empty()) throw std::invalid_argument("empty size");
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0)
    throw std::invalid_argument("size '" + std::string(text) + "' does not start with a number");
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    if (value > (UINT64_MAX - 9) / 10)
      throw std::invalid_argument("size '" + std::string(text) + "' too large");
    value = value * 10 + static_cast<std::uint64_t>(text[i] - '0');
  }
  std::string_view suffix = text.substr(digits);
  std::uint64_t multiplier = 1;
  if (suffix == "" || suffix == "B") {
    multiplier = 1;
  } else if (suffix == "K" || suffix == "k" || suffix == "KB" || suffix == "KiB") {
    multiplier = 1ull << 10;
  } else if (suffix == "M" || suffix == "MB" || suffix == "MiB") {
    multiplier = 1ull << 20;
  } else if (suffix == "G" || suffix == "GB" || suffix == "GiB") {
    multiplier = 1ull << 30;
  } else {
    throw std::invalid_argument("size '" + std::string(text) + "': unknown suffix (use K, M or G)");
  }
  if (value > UINT64_MAX / multiplier)
    throw std::invalid_argument("size '" + std::string(text) + "' too large");
  return static_cast<std::size_t>(value * multiplier);
}

std::vector<std::size_t> parse_size_list(std::string_view text) {
  std::vector<std::size_t> sizes;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    sizes.push_back(parse_byte_size(text.substr(start, comma - start)));
    start = comma + 1;
  }
  return sizes;
}

std::vector<std::size_t> stepped_sizes(std::size_t min_bytes, std::size_t max_bytes, int factor) {
  if (min_bytes == 0) throw std::invalid_argument("--min-bytes must be positive");
  if (max_bytes < min_bytes) throw std::invalid_argument("--max-bytes is below --min-bytes");
  if (factor < 2) throw std::invalid_argument("--step-factor must be at least 2");
  const std::size_t f = static_cast<std::size_t>(factor);
  std::vector<std::size_t> sizes;
  for (std::size_t b = min_bytes; b <= max_bytes; b *= f) {
    sizes.push_back(b);
    if (b > SIZE_MAX / f) break;
  }
  return sizes;
}

std::vector<AllreduceAlgo> parse_algo_list(std::string_view text) {
  if (text == "all") {
    return {AllreduceAlgo::kMpi, AllreduceAlgo::kRing, AllreduceAlgo::kHierarchical,
            AllreduceAlgo::kRecursiveDoubling, AllreduceAlgo::kRabenseifner,
            AllreduceAlgo::kParameterServer, AllreduceAlgo::kAuto};
  }
  std::vector<AllreduceAlgo> algos;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    algos.push_back(parse_allreduce_algo(text.substr(start, comma - start)));
    start = comma + 1;
  }
  return algos;
}

std::vector<Compression> parse_compression_list(std::string_view text) {
  std::vector<Compression> compressions;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    compressions.push_back(parse_compression(text.substr(start, comma - start)));
    start = comma + 1;
  }
  return compressions;
}

float bench_value(int rank, std::size_t i) {
  return static_cast<float>(
      static_cast<int>((static_cast<std::size_t>(rank + 1) * 5 + i * 7) % 13) - 6);
}

namespace {

struct Variant {
  AllreduceAlgo algo;
  Compression compression;
};

// Every algorithm with every transport, algorithm by algorithm; mpi and rd move fp32
// only, so they run once, uncompressed.
std::vector<Variant> variants_of(const BenchConfig& config) {
  std::vector<Variant> variants;
  for (AllreduceAlgo algo : config.algos) {
    bool plain_done = false;
    for (Compression c : config.compressions) {
      const bool fp32_only = algo == AllreduceAlgo::kMpi || algo == AllreduceAlgo::kRecursiveDoubling;
      if (fp32_only) c = Compression::kNone;
      if (c == Compression::kNone) {
        if (plain_done) continue;
        plain_done = true;
      }
      variants.push_back({algo, c});
    }
  }
  return variants;
}

std::string row_name(AllreduceAlgo algo, Compression compression) {
  std::string name(allreduce_algo_name(algo));
  if (compression != Compression::kNone) name.append("/").append(compression_name(compression));
  return name;
}

// Mismatching elements on this rank after one all-reduce of bench_value data (small
// integers: their sums are exact in bf16 and fp16 too).
std::uint64_t check_once(Communicator& comm, std::vector<float>& data, std::size_t count,
                         AllreduceAlgo algo, bool mean, Compression compression) {
  const int n = comm.size();
  for (std::size_t i = 0; i < count; ++i) data[i] = bench_value(comm.rank(), i);
  comm.allreduce(std::span<float>(data.data(), count), algo, mean, compression);
  std::uint64_t errors = 0;
  const float scale = 1.0f / static_cast<float>(n);
  for (std::size_t i = 0; i < count; ++i) {
    float expected = 0.0f;
    for (int r = 0; r < n; ++r) expected += bench_value(r, i);
    if (mean) expected *= scale;
    if (data[i] != expected) ++errors;
  }
  return errors;
}

void print_header(std::ostream& out, const BenchConfig& config) {
  out << fmt::format("#{:>12} {:>11} {:>9} {:>11} {:>11} {:>11} {:>11} {:>11}{} {:>7}\n", "size(B)",
                     "count", "algo", "min(us)", "avg(us)", "max(us)", "algbw(GB/s)", "busbw(GB/s)",
                     config.compare_to_mpi ? fmt::format(" {:>7}", "vs_mpi") : "", "errors");
}

void print_row(std::ostream& out, const BenchRow& row, const BenchConfig& config) {
  std::string ratio;
  if (config.compare_to_mpi)
    ratio = row.vs_mpi > 0 ? fmt::format(" {:>7.2f}", row.vs_mpi) : fmt::format(" {:>7}", "-");
  out << fmt::format(
      " {:>12} {:>11} {:>9} {:>11.1f} {:>11.1f} {:>11.1f} {:>11.3f} {:>11.3f}{} {:>7}\n", row.bytes,
      row.count, row.algo, row.time_min_us, row.time_avg_us, row.time_max_us, row.algbw_gbs,
      row.busbw_gbs, ratio, row.errors);
  out.flush();
}

}  // namespace

std::vector<BenchRow> run_allreduce_bench(Communicator& comm, const BenchConfig& config,
                                          std::ostream* out) {
  if (config.iters < 1) throw std::invalid_argument("--iters must be at least 1");
  if (config.warmup < 0) throw std::invalid_argument("--warmup must be non-negative");
  if (config.repeats < 1) throw std::invalid_argument("--repeats must be at least 1");
  if (config.compressions.empty()) throw std::invalid_argument("--compress needs a value");
  const std::vector<Variant> variants = variants_of(config);
  const int n = comm.size();
  const bool print = out != nullptr && comm.rank() == 0;
  std::size_t largest = 0;
  for (std::size_t b : config.sizes) largest = std::max(largest, b / sizeof(float));
  std::vector<float> data(largest);
  if (print) print_header(*out, config);

  std::vector<BenchRow> rows;
  for (std::size_t bytes : config.sizes) {
    const std::size_t count = bytes / sizeof(float);
    const std::span<float> span(data.data(), count);
    const std::size_t algos = variants.size();
    std::vector<double> local_errors(algos, 0.0);
    for (std::size_t a = 0; a < algos; ++a) {
      local_errors[a] = static_cast<double>(check_once(comm, data, count, variants[a].algo,
                                                       config.mean, variants[a].compression));
    }
    // Timed data: zeros, so repeated in-place sums stay finite whatever the iteration
    // count (the checks above covered the arithmetic).
    std::fill(span.begin(), span.end(), 0.0f);
    // Repeats take turns over the algorithms, so a burst of load from other processes on
    // a shared machine hits them alike; each algorithm keeps its best repeat.
    std::vector<double> best_us(algos, 0.0);
    for (int rep = 0; rep < config.repeats; ++rep) {
      for (std::size_t a = 0; a < algos; ++a) {
        const AllreduceAlgo algo = variants[a].algo;
        const Compression transport = variants[a].compression;
        if (rep == 0) {
          for (int i = 0; i < config.warmup; ++i)
            comm.allreduce(span, algo, config.mean, transport);
        }
        comm.barrier();
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < config.iters; ++i) comm.allreduce(span, algo, config.mean, transport);
        const double per_call_us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                .count() /
            config.iters;
        best_us[a] = rep == 0 ? per_call_us : std::min(best_us[a], per_call_us);
      }
    }
    double mpi_busbw = 0;
    const std::size_t first = rows.size();
    for (std::size_t a = 0; a < algos; ++a) {
      BenchRow row;
      row.bytes = count * sizeof(float);
      row.count = count;
      row.algo = row_name(variants[a].algo, variants[a].compression);
      const AllreducePlan plan = comm.plan_allreduce(variants[a].algo, row.bytes, variants[a].compression);
      if (plan.algo == AllreduceAlgo::kRabenseifner) row.rab_lanes = plan.rab_lanes;
      double sums[2] = {best_us[a], local_errors[a]};
      comm.allreduce_sum(sums);
      double extremes[2] = {best_us[a], -best_us[a]};
      comm.allreduce_max(extremes);
      row.time_avg_us = sums[0] / n;
      row.errors = static_cast<std::uint64_t>(sums[1]);
      row.time_max_us = extremes[0];
      row.time_min_us = -extremes[1];
      row.algbw_gbs =
          row.time_avg_us > 0 ? static_cast<double>(row.bytes) / (row.time_avg_us * 1e3) : 0.0;
      // nccl-tests' all-reduce bus bandwidth; on one rank there is no bus, report algbw.
      row.busbw_gbs = row.algbw_gbs * (n > 1 ? 2.0 * (n - 1) / n : 1.0);
      if (variants[a].algo == AllreduceAlgo::kMpi) mpi_busbw = row.busbw_gbs;
      rows.push_back(row);
    }
    for (std::size_t i = first; i < rows.size(); ++i) {
      if (config.compare_to_mpi && mpi_busbw > 0) rows[i].vs_mpi = rows[i].busbw_gbs / mpi_busbw;
      if (print) print_row(*out, rows[i], config);
    }
  }
  return rows;
}

std::vector<BenchPrediction> predict_bench_rows(const std::vector<BenchRow>& rows, int ranks,
                                                std::size_t doubling_max_bytes,
                                                const AllreduceCostModel& model) {
  std::vector<BenchPrediction> out;
  for (const BenchRow& row : rows) {
    // Row names are "algo" or "algo/transport" (row_name).
    const std::size_t slash = row.algo.find('/');
    const std::string name = row.algo.substr(0, slash);
    const Compression compression = slash == std::string::npos
                                        ? Compression::kNone
                                        : parse_compression(row.algo.substr(slash + 1));
    const AllreduceAlgo algo = parse_allreduce_algo(name);
    if (algo != AllreduceAlgo::kRing && algo != AllreduceAlgo::kRabenseifner &&
        algo != AllreduceAlgo::kRecursiveDoubling)
      continue;
    // rab as it ran: in row.rab_lanes lanes (the model covers lanes at one rank per node).
    const bool lanes = algo == AllreduceAlgo::kRabenseifner && row.rab_lanes > 1;
    const double predicted =
        1e6 * (lanes ? predict_rab_seconds(row.bytes, ranks, compression, model, ModelLayout{}, row.rab_lanes)
                     : predict_allreduce_seconds(algo, row.bytes, ranks, compression, doubling_max_bytes, model));
    out.push_back({row.bytes, lanes ? row.algo + " x" + std::to_string(row.rab_lanes) : row.algo, predicted,
                   row.time_avg_us, row.time_avg_us > 0 ? predicted / row.time_avg_us - 1 : 0.0});
  }
  return out;
}

void write_bench_csv(const std::vector<BenchRow>& rows, int ranks, const std::string& path) {
  std::ofstream file(path);
  if (!file) throw std::runtime_error("cannot open '" + path + "' for writing the CSV results");
  file << "bytes,count,algo,ranks,time_min_us,time_avg_us,time_max_us,algbw_gbs,busbw_gbs,vs_mpi,"
          "errors\n";
  for (const BenchRow& r : rows) {
    file << fmt::format("{},{},{},{},{:.3f},{:.3f},{:.3f},{:.6f},{:.6f},{:.4f},{}\n", r.bytes,
                        r.count, r.algo, ranks, r.time_min_us, r.time_avg_us, r.time_max_us,
                        r.algbw_gbs, r.busbw_gbs, r.vs_mpi, r.errors);
  }
  if (!file) throw std::runtime_error("error writing '" + path + "'");
}

void write_bench_json(const std::vector<BenchRow>& rows, int ranks, const std::string& library,
                      const BenchConfig& config, const std::string& path) {
  std::ofstream file(path);
  if (!file) throw std::runtime_error("cannot open '" + path + "' for writing the JSON results");
  std::string escaped;
  for (char c : library) {
    if (c == '"' || c == '\\') escaped += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) escaped += c;
  }
  std::string compressions;
  for (Compression c : config.compressions)
    compressions += fmt::format("{}\"{}\"", compressions.empty() ? "" : ", ", compression_name(c));
  file << fmt::format(
      "{{\n  \"ranks\": {},\n  \"library\": \"{}\",\n  \"warmup\": {},\n  \"iters\": {},\n  "
      "\"mean\": {},\n"
      "  \"repeats\": {},\n  \"compression\": [{}],\n  \"ring_chunk_bytes\": {},\n"
      "  \"ring_chunk_bytes_network\": {},\n  \"results\": [\n",
      ranks, escaped, config.warmup, config.iters, config.mean ? "true" : "false", config.repeats,
      compressions, config.tuning.ring_chunk_bytes,
      config.tuning.ring_chunk_bytes_network);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const BenchRow& r = rows[i];
    file << fmt::format(
        "    {{\"bytes\": {}, \"count\": {}, \"algo\": \"{}\", \"time_min_us\": {:.3f}, "
        "\"time_avg_us\": {:.3f}, "
        "\"time_max_us\": {:.3f}, \"algbw_gbs\": {:.6f}, \"busbw_gbs\": {:.6f}, \"vs_mpi\": "
        "{:.4f}, \"errors\": {}}}{}\n",
        r.bytes, r.count, r.algo, r.time_min_us, r.time_avg_us, r.time_max_us, r.algbw_gbs,
        r.busbw_gbs, r.vs_mpi, r.errors, i + 1 < rows.size() ? "," : "");
  }
  file << "  ]\n}\n";
  if (!file) throw std::runtime_error("error writing '" + path + "'");
}

}  // namespace ringtrain
