// `auto`: the all-reduce algorithm by message size.
//
// Crossovers measured with apps/allreduce_bench on the development machine (2 cores,
// Open MPI 4.1.4, shared memory via the vader BTL, np 2 and np 4 oversubscribed); see
// the report in scripts/bench/README or the commit message that set these numbers.
#include "collectives/AllreduceTuning.h"

namespace ringtrain {

AllreduceAlgo choose_auto_algo(std::size_t bytes, int ranks, const AllreduceTuning& tuning) {
  if (ranks <= 1) return AllreduceAlgo::kRing;
  // Latency-bound: recursive doubling / halving-doubling needs log2 N rounds against the
  // ring's 2(N-1).
  if (bytes < tuning.auto_ring_min_bytes) return AllreduceAlgo::kRecursiveDoubling;
  return AllreduceAlgo::kRing;
}

}  // namespace ringtrain
