// What `--overlap auto` resolves to: whether a communication thread can hide anything.
// Overlap pays when a bucket's transfer progresses without this host's CPU (a network: the
// kernel and the NIC move the bytes while backward runs) or when the rank has a core to
// spare for the thread. Ranks that all share one host exchange gradients through shared
// memory, which the CPU copies; with every core busy computing, the thread then only takes
// cycles from backward (np 2 on 2 cores: docs/benchmarks/train-throughput-np2.md).
#pragma once

#include <string>

namespace ringtrain {

struct OverlapPolicy {
  int ranks = 1;            // ranks in the job
  int ranks_on_host = 1;    // ranks sharing memory with this rank (its node, itself included)
  int threads_per_rank = 1;
  int cores_for_rank = 1;   // cores this rank may run on: its affinity mask, at most its share of the host

  // From the job's ranks, the ranks on this rank's node (Communicator::ranks_on_node, MPI's
  // locality), its threads, the host's cores and the size of its affinity mask.
  static OverlapPolicy from(int ranks, int ranks_on_node, int threads_per_rank, int host_cores,
                            int affinity_cores);
  // This process: std::thread::hardware_concurrency() and sched_getaffinity().
  static OverlapPolicy here(int ranks, int ranks_on_node, int threads_per_rank);

  bool crosses_network() const { return ranks_on_host < ranks; }
  bool spare_core() const { return cores_for_rank > threads_per_rank; }
  // `auto`: on when either holds (and there is more than one rank).
  bool pays() const { return ranks > 1 && (crosses_network() || spare_core()); }
  // One line for the run's console when auto turns overlap off.
  std::string why_off() const;
};

}  // namespace ringtrain
