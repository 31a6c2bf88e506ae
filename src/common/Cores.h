// The cores a rank can use, and how many OpenMP threads each rank runs (--threads).
#pragma once

#include <optional>
#include <string>

namespace ringtrain {

// This host's logical cores (std::thread::hardware_concurrency(), at least 1).
int host_cores() noexcept;
// The cores in this process's affinity mask (sched_getaffinity; 0 if unknown): 1 when
// mpirun binds each rank to a core, as bare `mpirun -np 2` does.
int affinity_cores() noexcept;

// Threads per rank and where the number came from.
struct ThreadChoice {
  int threads = 1;
  std::string source;  // "--threads", "OMP_NUM_THREADS" or "cores / ranks on the node"
};

// --threads T when T > 0; else OMP_NUM_THREADS when set to a positive integer (`omp_env`,
// null when unset); else this rank's share of the node, host_cores / ranks_on_node, but no
// more than its affinity mask holds (affinity_cores; 0: no mask known). At least 1.
// Throws std::invalid_argument naming OMP_NUM_THREADS when it is set but not a positive integer.
ThreadChoice choose_threads(int flag, const char* omp_env, int ranks_on_node, int host_cores, int affinity_cores);

// The warning for ranks_on_node x threads above the node's cores, or nothing.
std::optional<std::string> oversubscription_warning(int ranks_on_node, int threads, int host_cores);

}  // namespace ringtrain
