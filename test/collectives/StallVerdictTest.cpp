// Who find_stalled() names from the side channel's views, rule by rule, and the status
// record's wire form (a round trip, cut text, bytes that are not printable).
#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "collectives/SideSocket.h"
#include "collectives/StallStatus.h"
#include "collectives/StallVerdict.h"

using namespace ringtrain;
using Catch::Matchers::Contains;

namespace {

StallStatus waiting_in(const char* operation, std::int64_t step, double wait_s) {
  StallStatus s;
  s.step = step;
  s.phase = "training";
  s.operation = operation;
  s.what = "MPI_Allreduce";
  s.waiting = true;
  s.wait_s = wait_s;
  s.still_s = wait_s;
  return s;
}

PeerView peer(int rank, double silent_s, StallStatus last) {
  return PeerView{rank, "node" + std::to_string(rank), true, silent_s, std::move(last)};
}

std::vector<int> ranks(const std::vector<StalledRank>& named) {
  std::vector<int> r;
  for (const auto& n : named) r.push_back(n.rank);
  return r;
}

}  // namespace

TEST_CASE("find_stalled names the silent ranks, not the awaited peer", "[stall]") {
  StallVerdictInput in;
  in.self = 0;
  in.mine = waiting_in("ring all-reduce", 57, 4.0);
  in.mine.peer = 2;  // rank 2 waits on rank 1 in turn
  in.peers = {peer(1, 4.5, waiting_in("all-reduce of metrics", 56, 0.1)), peer(2, 0.2, waiting_in("ring all-reduce", 57, 4.0))};
  const auto named = find_stalled(in);
  REQUIRE(ranks(named) == std::vector<int>{1});
  const std::string text = describe_stalled(named);
  CHECK_THAT(text, Contains("rank 1 on node1 [silent for 4.5 s; last seen: step 56, training, in all-reduce of metrics"));
}

TEST_CASE("find_stalled: a silent hub is named alone; ranks that exited never", "[stall]") {
  StallVerdictInput in;
  in.self = 2;
  in.mine = waiting_in("barrier", 10, 5.0);
  in.hub = peer(0, 5.0, waiting_in("barrier", 10, 0.0));
  in.hub_silent = true;
  in.peers = {in.hub, peer(1, 5.0, waiting_in("barrier", 10, 0.0))};
  CHECK(ranks(find_stalled(in)) == std::vector<int>{0});
  in.hub.exited = true;
  in.peers[0].exited = true;
  in.peers[1].exited = true;
  CHECK(find_stalled(in).empty());
}

TEST_CASE("find_stalled: a live rank outside MPI for as long as this one waited; never one waiting elsewhere", "[stall]") {
  StallVerdictInput in;
  in.self = 0;
  in.silence_s = 1.5;
  in.mine = waiting_in("barrier", 20, 6.0);
  StallStatus busy;
  busy.step = 20;
  busy.phase = "checkpoint";
  busy.still_s = 5.8;
  in.peers = {peer(1, 0.1, busy), peer(2, 0.1, waiting_in("barrier", 20, 6.0))};
  auto named = find_stalled(in);
  // Not heard from for a while, but not yet silent: too stale to judge (rule 2 decides later).
  in.peers[0].silent_s = 1.0;
  CHECK(find_stalled(in).empty());
  in.peers[0].silent_s = 0.1;
  named = find_stalled(in);
  REQUIRE(ranks(named) == std::vector<int>{1});
  CHECK_THAT(describe_stalled(named), Contains("outside MPI for 5.9 s") && Contains("checkpoint, outside MPI for 5.8 s"));
  // Working, but not for as long as this rank has waited: not the one.
  in.peers[0].last.still_s = 2.0;
  CHECK(find_stalled(in).empty());
  // Everyone waits, one of them in another operation at an earlier step (a parameter server
  // waits for requests while workers sum metrics): not named.
  in.peers = {peer(1, 0.1, waiting_in("broadcast", 19, 6.0)), peer(2, 0.1, waiting_in("barrier", 20, 6.0)),
              peer(3, 0.1, waiting_in("barrier", 20, 6.0))};
  CHECK(find_stalled(in).empty());
}

TEST_CASE("StallStatus round-trips its wire form; text is cut and made printable", "[stall]") {
  StallStatus s = waiting_in("ring all-reduce", 1234567890123, 2.5);
  s.bucket = 3;
  s.buckets = 7;
  s.peer = 5;
  s.what = "receive";
  std::array<std::byte, StallStatus::kWireBytes> wire{};
  s.encode(wire);
  const StallStatus d = StallStatus::decode(wire);
  CHECK(d.step == s.step);
  CHECK(d.bucket == 3);
  CHECK(d.buckets == 7);
  CHECK(d.peer == 5);
  CHECK(d.waiting);
  CHECK(d.wait_s == Approx(2.5));
  CHECK(d.operation == "ring all-reduce");
  CHECK(d.where() == "step 1234567890123, training, in ring all-reduce (receive, bucket 4 of 7) waiting for rank 5 for 2.5 s");
  s.operation = std::string(100, 'x');
  s.phase = std::string("a\x01\x7f", 3);
  s.encode(wire);
  const StallStatus cut = StallStatus::decode(wire);
  CHECK(cut.operation == std::string(39, 'x'));
  CHECK(cut.phase == "a??");
}

TEST_CASE("Side channel addresses: the hub's address on a subnet the rank has, Open MPI's filters", "[stall]") {
  const auto hub = parse_interfaces("lo/127.0.0.1/8/1;eth0/192.168.5.1/24/0;ib0/10.213.0.1/24/0;");
  REQUIRE(hub.size() == 3);
  const auto mpi = mpi_interfaces(hub, nullptr, nullptr);
  REQUIRE(mpi.size() == 2);  // no loopback
  const auto rank = parse_interfaces("lo/127.0.0.1/8/1;ib0/10.213.0.7/24/0;");
  CHECK(reachable_address(mpi, rank) == parse_ipv4("10.213.0.1"));
  CHECK(reachable_address(mpi_interfaces(hub, "10.213.0.0/24", nullptr), rank) == parse_ipv4("10.213.0.1"));
  CHECK(mpi_interfaces(hub, "eth0", nullptr).size() == 1);
  CHECK(mpi_interfaces(hub, nullptr, "eth0,ib0").empty());
  // No shared subnet: the first candidate.
  CHECK(reachable_address(mpi, parse_interfaces("eth1/172.16.0.2/16/0;")) == parse_ipv4("192.168.5.1"));
  CHECK(format_ipv4(*parse_ipv4("10.1.2.3")) == "10.1.2.3");
  CHECK(!parse_ipv4("10.1.2"));
}
