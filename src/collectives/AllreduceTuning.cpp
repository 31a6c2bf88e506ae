// `auto`: the all-reduce algorithm by message size and node layout.
//
// Crossovers measured with apps/allreduce_bench on the development machine (2 shared
// cores, AMD EPYC VM, Open MPI 4.1.4) on 2026-11-22:
// - one host (vader shared memory, np 2 and np 4 oversubscribed): recursive
//   halving-doubling (rd) and the ring are within noise of each other at np 2; at np 4 rd
//   is 3-15% faster up to 4 MiB (log2 N rounds against 2(N-1), and every round costs
//   context switches when ranks share cores), the ring ahead from 16 MiB on
//   (e.g. 64 MiB: ring 58-70 ms, rd 63-76 ms, MPI_Allreduce 120-131 ms).
// - several hosts (scripts/mpirun/cluster.sh, 4 namespaces, 1 Gbit/s tbf links): rd is
//   1.5-3x faster than the ring up to 512 KiB (latency-bound, ~1 ms per round on the
//   loaded emulation), level at 1 MiB, and the ring 1.3-1.5x faster from 2 MiB on.
// Hence rd below 4 MiB on one host and below 1 MiB across hosts, the ring above.
// Rechecked on 2026-11-23 with the eager-sized network chunks (docs/benchmarks/
// allreduce-cluster-sweep.txt, loaded machine): from 1 MiB on the ring beats rd, ps and
// MPI_Allreduce at 2, 3 and 4 nodes and both MTUs (1 MiB: ring 7.9 / 7.9 / 17.7 ms, rd
// 11.0 / 23.0 / 31.4 ms at np 2 / 3 / 4); sizes below 1 MiB were not re-measured.
// With several ranks on more than one node, hier sends each vector over a node's link
// once instead of once per rank (docs/benchmarks/allreduce-emulated-cluster.txt).
#include "collectives/AllreduceTuning.h"

namespace ringtrain {

AllreduceAlgo choose_auto_algo(std::size_t bytes, const NodeLayout& layout,
                               Compression compression, const AllreduceTuning& tuning) {
  if (layout.ranks <= 1) return AllreduceAlgo::kRing;
  if (layout.nodes_with_several_ranks > 1) return AllreduceAlgo::kHierarchical;
  if (compression != Compression::kNone) return AllreduceAlgo::kRing;
  const std::size_t threshold =
      layout.nodes == 1 ? tuning.auto_ring_min_bytes_single_host : tuning.auto_ring_min_bytes;
  return bytes < threshold ? AllreduceAlgo::kRecursiveDoubling : AllreduceAlgo::kRing;
}

}  // namespace ringtrain
