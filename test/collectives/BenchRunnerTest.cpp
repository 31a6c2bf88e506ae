// BenchRunner at np 1..4: rows per size and algorithm, zero errors, consistent
// bandwidth arithmetic, the vs_mpi column and the CSV/JSON files.
#include "collectives/Mpi.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "collectives/BenchRunner.h"
#include "collectives/MpiCommunicator.h"
#include "support/mpi_test_util.h"

using namespace ringtrain;
using ringtrain::test::all_ranks;

TEST_CASE("run_allreduce_bench checks every size and reports consistent rows") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int n = comm.size();
  BenchConfig config;
  config.sizes = {4, 12, 4096, 65540};
  config.algos = parse_algo_list("all");
  config.compare_to_mpi = true;
  config.warmup = 1;
  config.iters = 2;
  config.repeats = 2;
  std::ostringstream table;
  const auto rows = run_allreduce_bench(comm, config, &table);
  bool ok = rows.size() == config.sizes.size() * config.algos.size();
  const double factor = n > 1 ? 2.0 * (n - 1) / n : 1.0;
  for (std::size_t i = 0; ok && i < rows.size(); ++i) {
    const BenchRow& row = rows[i];
    ok = row.errors == 0 && row.bytes == config.sizes[i / config.algos.size()] &&
         row.count * 4 == row.bytes && row.time_min_us <= row.time_avg_us &&
         row.time_avg_us <= row.time_max_us && row.time_min_us > 0 &&
         std::abs(row.algbw_gbs - row.bytes / (row.time_avg_us * 1e3)) <= 1e-9 * row.algbw_gbs &&
         std::abs(row.busbw_gbs - row.algbw_gbs * factor) <= 1e-9 * row.busbw_gbs &&
         (row.algo != "mpi" || row.vs_mpi == 1.0);
  }
  // Rank 0 printed a header plus one line per row; the others printed nothing.
  std::size_t lines = 0;
  for (char c : table.str()) lines += c == '\n';
  ok = ok && lines == (comm.rank() == 0 ? rows.size() + 1 : 0);
  // Every rank returns the same rows (times were reduced over ranks).
  double checksum = 0;
  for (const auto& row : rows) checksum += row.time_avg_us + row.busbw_gbs;
  double extremes[2] = {checksum, -checksum};
  comm.allreduce_max(extremes);
  ok = ok && extremes[0] == -extremes[1];
  REQUIRE(all_ranks(ok));

  if (comm.rank() == 0) {
    const std::string csv = "allreduce_bench_test_" + std::to_string(n) + ".csv";
    const std::string json = "allreduce_bench_test_" + std::to_string(n) + ".json";
    write_bench_csv(rows, n, csv);
    write_bench_json(rows, n, comm.library_version(), config, json);
    std::ifstream in(csv);
    std::string line;
    std::size_t csv_lines = 0;
    while (std::getline(in, line)) ++csv_lines;
    CHECK(csv_lines == rows.size() + 1);
    std::ifstream jin(json);
    std::stringstream text;
    text << jin.rdbuf();
    CHECK(text.str().find("\"algo\": \"ring\"") != std::string::npos);
    CHECK(text.str().find("\"ranks\": " + std::to_string(n)) != std::string::npos);
    std::remove(csv.c_str());
    std::remove(json.c_str());
  }
}
