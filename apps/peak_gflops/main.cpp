// peak_gflops: the fp32 peak this machine's cores reach in practice, as oneDNN's sgemm on square
// matrices with a given number of OpenMP threads. The benchmarks state a training run's FLOP rate
// as a share of it (bench.py train's "% of peak"), measured in the same invocation as the run.
#include <CLI/CLI.hpp>
#include <dnnl.h>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "FlagRange.h"

namespace {

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

}  // namespace

int main(int argc, char** argv) {
  int n = 2048, threads = 1, repeats = 5;
  bool json = false;
  CLI::App app{"peak_gflops: fp32 GFLOP/s of oneDNN's sgemm (C = A B, N x N), the best of several calls"};
  app.add_option("--n", n, "matrix size N")->capture_default_str()->check(ringtrain::from_to(64, 16384));
  app.add_option("--threads", threads, "OpenMP threads")->capture_default_str()->check(ringtrain::from_to(1, 4096));
  app.add_option("--repeats", repeats, "timed calls (after one untimed)")
      ->capture_default_str()
      ->check(ringtrain::from_to(1, 1000));
  app.add_flag("--json", json, "one JSON line instead of text");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // a usage error exits 2, as ringtrain's and allreduce_sim's do
  }

  omp_set_num_threads(threads);
  const auto size = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  std::vector<float> a(size), b(size), c(size);
  for (std::size_t i = 0; i < size; ++i) {  // values of both signs, so no product over- or underflows
    a[i] = float(int(i % 17) - 8) / 8.0f;
    b[i] = float(int(i % 13) - 6) / 6.0f;
  }
  const auto call = [&] {
    if (dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n) != dnnl_success) {
      std::fprintf(stderr, "peak_gflops: dnnl_sgemm failed for N = %d\n", n);
      std::exit(1);
    }
  };
  call();  // first touch of C, oneDNN's code generation
  double best = 0, wall_total = 0, cpu_total = 0;
  for (int r = 0; r < repeats; ++r) {
    const double cpu0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    call();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cpu_total += cpu_seconds() - cpu0;
    wall_total += wall;
    best = std::max(best, 2.0 * double(n) * double(n) * double(n) / wall / 1e9);
  }
  // CPU time over wall time tells whether the calls used the threads asked for (1.00 per thread).
  const double busy = cpu_total / wall_total;
  if (json)
    std::printf("{\"gflops\":%.2f,\"n\":%d,\"threads\":%d,\"repeats\":%d,\"cpu_per_wall\":%.2f}\n", best, n, threads,
                repeats, busy);
  else
    std::printf("sgemm %dx%dx%d, %d thread(s): best %.1f GFLOP/s of %d calls (%.1f per thread); cpu/wall %.2f\n", n,
                n, n, threads, best, repeats, best / threads, busy);
  return 0;
}
