// The all-reduce benchmark behind apps/allreduce_bench (nccl-tests style): for each size
// and algorithm, a correctness check against values derived from rank and index, then
// timed iterations, reduced to min/avg/max over ranks, algbw and busbw.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/AllreduceCostModel.h"
#include "collectives/AllreduceTuning.h"
#include "collectives/Communicator.h"

namespace ringtrain {

struct BenchConfig {
  std::vector<std::size_t> sizes;    // bytes (multiples of 4)
  std::vector<AllreduceAlgo> algos;  // run in this order for every size
  bool compare_to_mpi = false;       // add the vs_mpi column (algo list contains mpi)
  int warmup = 5;
  int iters = 20;
  int repeats = 3;    // timed loops per algorithm; the best one counts
  bool mean = false;  // check and time the mean variant
  // Transports: every algorithm runs with each (mpi and rd, fp32 only, once uncompressed);
  // a row's algo reads "ring/bf16" for a 16-bit one.
  std::vector<Compression> compressions{Compression::kNone};
  // Recorded in the JSON; the communicator must have been built with it (it is fixed at
  // construction, MpiCommunicatorOptions).
  AllreduceTuning tuning;
};

struct BenchRow {
  std::size_t bytes = 0;
  std::size_t count = 0;
  std::string algo;
  double time_min_us = 0;  // per-rank time per call (best repeat), min/avg/max over ranks
  double time_avg_us = 0;
  double time_max_us = 0;
  double algbw_gbs = 0;      // bytes / avg time, GB = 1e9 B
  double busbw_gbs = 0;      // algbw * 2(N-1)/N (nccl-tests' all-reduce bus bandwidth)
  double vs_mpi = 0;         // busbw / busbw of mpi at this size (0 when not measured)
  std::uint64_t errors = 0;  // mismatching elements, summed over ranks
  int rab_lanes = 1;         // the lanes rab ran in (auto's rab included); 1 for other algorithms
};

// "4", "64K", "256M", "1G" (binary multiples) -> bytes; throws std::invalid_argument.
std::size_t parse_byte_size(std::string_view text);
// "4,1K,256M" -> sizes.
std::vector<std::size_t> parse_size_list(std::string_view text);
// min, f min, f^2 min, ... <= max (nccl-tests' -f); throws std::invalid_argument for
// min 0, max < min or f < 2.
std::vector<std::size_t> stepped_sizes(std::size_t min_bytes, std::size_t max_bytes,
                                       int factor = 2);
// "ring" | ... | "all" or a comma list; "all" = mpi, ring, hier, rd, rab, ps, auto.
std::vector<AllreduceAlgo> parse_algo_list(std::string_view text);
// "none,bf16" -> transports.
std::vector<Compression> parse_compression_list(std::string_view text);

// The value rank `rank` contributes at index i: a small integer in [-6, 6], so sums over
// any realistic rank count are exact in float32.
float bench_value(int rank, std::size_t i);

// Runs the benchmark on every rank; rank 0 prints the table to `out` (may be null) as it
// goes. Returns the rows (identical on all ranks).
std::vector<BenchRow> run_allreduce_bench(Communicator& comm, const BenchConfig& config,
                                          std::ostream* out);

// A measured row beside the cost model's prediction (one rank per node assumed).
struct BenchPrediction {
  std::size_t bytes = 0;
  std::string algo;  // the row's name, with " xK" for rab in K > 1 lanes (predicted for them)
  double predicted_us = 0;
  double measured_us = 0;  // the row's time_avg_us
  double error = 0;        // predicted / measured - 1
};

// The rows the model covers (ring, rab, rd, with any transport), in row order.
std::vector<BenchPrediction> predict_bench_rows(const std::vector<BenchRow>& rows, int ranks,
                                                std::size_t doubling_max_bytes,
                                                const AllreduceCostModel& model);

void write_bench_csv(const std::vector<BenchRow>& rows, int ranks, const std::string& path);
void write_bench_json(const std::vector<BenchRow>& rows, int ranks, const std::string& library,
                      const BenchConfig& config, const std::string& path);

}  // namespace ringtrain
