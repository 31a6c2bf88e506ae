// OverlapPolicy: --overlap auto from where the ranks run and what cores they have.
#include "overlap/OverlapPolicy.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/Cores.h"

namespace ringtrain {

OverlapPolicy OverlapPolicy::from(int ranks, int ranks_on_node, int threads_per_rank, int host_cores,
                                  int affinity_cores) {
  OverlapPolicy p;
  p.ranks = std::max(1, ranks);
  p.ranks_on_host = std::clamp(ranks_on_node, 1, p.ranks);
  p.threads_per_rank = std::max(1, threads_per_rank);
  // Unbound ranks see every core in their mask, but they share them with the host's other
  // ranks: a rank's fair share is what it can count on.
  const int share = std::max(1, host_cores / p.ranks_on_host);
  p.cores_for_rank = std::max(1, std::min(share, affinity_cores > 0 ? affinity_cores : share));
  return p;
}

OverlapPolicy OverlapPolicy::here(int ranks, int ranks_on_node, int threads_per_rank) {
  return from(ranks, ranks_on_node, threads_per_rank, host_cores(), affinity_cores());
}

std::string OverlapPolicy::why_off() const {
  return fmt::format(
      "ringtrain: note: --overlap auto: off, all {} ranks on one node and no spare core for the communication "
      "thread ({} thread(s) per rank, {} core(s) each); --overlap on forces it",
      ranks, threads_per_rank, cores_for_rank);
}

}  // namespace ringtrain
