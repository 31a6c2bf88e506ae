// Cores and threads per rank (Cores.h).
#include "common/Cores.h"

#include <sched.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>

#include <fmt/format.h>

namespace ringtrain {

int host_cores() noexcept { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

int affinity_cores() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
}

ThreadChoice choose_threads(int flag, const char* omp_env, int ranks_on_node, int host_cores, int affinity_cores) {
  if (flag > 0) return {flag, "--threads"};
  if (omp_env != nullptr && *omp_env != '\0') {
    // libgomp reads a list ("4,2" for nested levels); the first level is the rank's.
    const std::string text = omp_env;
    std::size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || n <= 0 || (used < text.size() && text[used] != ',')) {
      throw std::invalid_argument(
          fmt::format("OMP_NUM_THREADS='{}' is not a positive number of threads (unset it, or use --threads)", text));
    }
    return {n, "OMP_NUM_THREADS"};
  }
  int share = std::max(1, host_cores / std::max(1, ranks_on_node));
  if (affinity_cores > 0) share = std::min(share, affinity_cores);
  return {share, "cores / ranks on the node"};
}

std::optional<std::string> oversubscription_warning(int ranks_on_node, int threads, int host_cores) {
  if (static_cast<long>(ranks_on_node) * threads <= host_cores) return std::nullopt;
  return fmt::format(
      "{} rank(s) x {} thread(s) on this node exceed its {} core(s): threads will wait for each other; lower "
      "--threads (or OMP_NUM_THREADS) or the ranks per node",
      ranks_on_node, threads, host_cores);
}

}  // namespace ringtrain
