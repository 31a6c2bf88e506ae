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
// Hence rd below 4 MiB on one host, the ring above.
// Across hosts the eager-sized network chunks (65408 B) moved the crossover down.
// Re-measured on 2026-11-23 (docs/benchmarks/allreduce-targets.md, section 5; bench lock
// held, load 3-16): at 3 nodes the ring beats rd from 64 KiB on (256 KiB: 7.4 against
// 8.3 ms, 512 KiB: 5.1 against 12.1 ms, MTU 1500); at 2 nodes the two move the same bytes
// and are level from 256 KiB (ring 2.0 / 4.0 / 8.1 ms, rd 2.1 / 4.1 / 9.6 ms at 256 KiB /
// 512 KiB / 1 MiB), rd ahead below (64 KiB: 0.09 against 0.18 ms). Hence the ring from
// 256 KiB across hosts, rd below.
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
