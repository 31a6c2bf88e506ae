// OverlapPolicy: what --overlap auto resolves to for the ways ranks are laid out.
#include <catch2/catch.hpp>

#include <string>

#include "overlap/OverlapPolicy.h"

using ringtrain::OverlapPolicy;

TEST_CASE("--overlap auto: off only when every rank shares one node and no core is spare") {
  // from(ranks, ranks on this rank's node, threads per rank, host cores, affinity cores)

  // np 2 on a 2-core host, unbound or bound to a core each, 1 thread: nothing to gain.
  CHECK_FALSE(OverlapPolicy::from(2, 2, 1, 2, 2).pays());
  CHECK_FALSE(OverlapPolicy::from(2, 2, 1, 2, 1).pays());
  // The same on 8 cores: each rank has 4, the communication thread has room.
  CHECK(OverlapPolicy::from(2, 2, 1, 8, 8).pays());
  // ... unless the threads take them all, or the rank is bound to a single core.
  CHECK_FALSE(OverlapPolicy::from(2, 2, 4, 8, 8).pays());
  CHECK_FALSE(OverlapPolicy::from(2, 2, 1, 8, 1).pays());

  // Across hosts the network moves the bytes whatever the cores: on (the emulated cluster's
  // nodes share 2 cores between them).
  const OverlapPolicy across = OverlapPolicy::from(2, 1, 1, 2, 2);
  CHECK(across.crosses_network());
  CHECK(across.pays());
  CHECK(OverlapPolicy::from(4, 2, 2, 2, 2).pays());

  // One rank has nothing to overlap.
  CHECK_FALSE(OverlapPolicy::from(1, 1, 1, 64, 64).pays());

  const OverlapPolicy p = OverlapPolicy::from(3, 3, 1, 2, 0);  // no mask known: the share
  CHECK(p.ranks == 3);
  CHECK(p.ranks_on_host == 3);
  CHECK(p.cores_for_rank == 1);
  CHECK_FALSE(p.pays());
  CHECK(p.why_off().find("--overlap on forces it") != std::string::npos);
}
