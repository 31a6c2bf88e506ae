// find_stalled: the rules listed in StallVerdict.h.
#include "collectives/StallVerdict.h"

#include <algorithm>

#include <fmt/format.h>

namespace ringtrain {
namespace {

StalledRank named(const PeerView& p, std::string why) { return StalledRank{p.rank, p.host, std::move(why), p.last}; }

}  // namespace

std::vector<StalledRank> find_stalled(const StallVerdictInput& in) {
  std::vector<StalledRank> out;
  if (in.hub_silent && !in.hub.exited) {
    out.push_back(named(in.hub, fmt::format("silent for {:.1f} s", in.hub.silent_s)));
    return out;
  }
  for (const PeerView& p : in.peers) {
    if (!p.exited && p.silent_s >= in.silence_s)
      out.push_back(named(p, p.heard ? fmt::format("silent for {:.1f} s", p.silent_s)
                                     : fmt::format("never heard from, {:.1f} s", p.silent_s)));
  }
  if (!out.empty()) return out;
  // A rank outside MPI that has not moved for as long as this one has waited.
  const double waited = in.mine.waiting ? in.mine.wait_s : 0.0;
  for (const PeerView& p : in.peers) {
    const double still = p.last.still_s + p.silent_s;
    const bool fresh = p.silent_s < in.silence_s / 2;  // else too stale to judge: rule 2 decides later
    if (!p.exited && fresh && !p.last.waiting && still >= std::max(in.silence_s, waited - in.slack_s))
      out.push_back(named(p, fmt::format("outside MPI for {:.1f} s", still)));
  }
  return out;
}

std::string describe_stalled(const std::vector<StalledRank>& stalled) {
  std::string s;
  for (const StalledRank& r : stalled) {
    if (!s.empty()) s += ", ";
    s += fmt::format("rank {} on {} [{}; last seen: {}]", r.rank, r.host.empty() ? std::string("?") : r.host, r.why,
                     r.last.where());
  }
  return s;
}

}  // namespace ringtrain
