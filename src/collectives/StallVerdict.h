// Which ranks hold a stalled job, from what this rank knows of the others over the stall
// side channel (StallChannel.h). A pure function of the views, so every rule is tested
// without processes. In order, the first rule that names anyone decides:
//   1. the side channel's hub (rank 0) went silent: rank 0 (the others' news came through it);
//   2. ranks silent for silence_s or longer: stopped, hung whole or unreachable (a SIGSTOPped
//      process sends nothing; a live one reports every poll);
//   3. ranks that report (heard within silence_s / 2), but have been outside any MPI wait,
//      without beginning or ending one, for as long as this rank has waited: hung or slow in
//      their own work.
// Nobody named means every rank reports, and waits: an MPI or network fault, or ranks waiting
// on each other in different operations. A rank waiting elsewhere is not named: in async
// mode servers and workers wait in different places as a matter of course.
// A rank whose process ended (its side channel closed) is never named: once one rank ends
// the job, the others' waits on it say nothing about who stopped.
#pragma once

#include <string>
#include <vector>

#include "collectives/StallStatus.h"

namespace ringtrain {

struct StalledRank {
  int rank = 0;
  std::string host;
  std::string why;  // "silent for 4.2 s", "outside MPI for 5.0 s"
  StallStatus last;
};

struct StallVerdictInput {
  int self = 0;
  StallStatus mine;               // this rank's status now (waiting, for wait_s)
  std::vector<PeerView> peers;    // every other rank this rank has news of
  bool hub_silent = false;        // (not on the hub) no word from the hub for silence_s
  PeerView hub;                   // the hub's view, when hub_silent
  double silence_s = 3.0;
  double slack_s = 1.0;           // poll granularity: how much older a live state can look
};

std::vector<StalledRank> find_stalled(const StallVerdictInput& in);

// "rank 1 on node-b [silent for 4.2 s; last seen: step 57, ...]", joined with ", ".
// Brackets delimit each rank's detail so a launcher can read the names back.
std::string describe_stalled(const std::vector<StalledRank>& stalled);

}  // namespace ringtrain
