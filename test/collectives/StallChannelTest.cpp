// The stall side channel between real ranks (np 2, 3): set up over MPI, every rank's status
// reaches the hub, a rank that stops sending is named silent by the others (through the hub
// for a member), and the hub drops a connection that does not carry the job's token.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include <sys/socket.h>

#include "collectives/MpiCommunicator.h"
#include "collectives/SideSocket.h"
#include "collectives/StallChannel.h"
#include "collectives/StallVerdict.h"

using namespace ringtrain;
using Clock = std::chrono::steady_clock;

namespace {

StallStatus waiting_at(std::int64_t step, double s) {
  StallStatus st;
  st.step = step;
  st.phase = "test";
  st.operation = "barrier";
  st.what = "MPI_Barrier";
  st.waiting = true;
  st.wait_s = s;
  st.still_s = s;
  return st;
}

// Exchanges every 20 ms for `seconds`, reporting a wait that began at `since`.
void exchange_for(StallChannel& ch, double seconds, Clock::time_point since) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    const auto now = Clock::now();
    ch.exchange(waiting_at(7, std::chrono::duration<double>(now - since).count()), now, 0.04);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

TEST_CASE("StallChannel: the rank that stops sending is the one named, on every other rank", "[stall]") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  StallChannel ch(comm, StallChannelOptions{});
  if (comm.size() == 1) {
    CHECK(!ch.active());
    return;
  }
  REQUIRE(ch.active());
  REQUIRE(ch.hosts().size() == static_cast<std::size_t>(comm.size()));
  const int last = comm.size() - 1;
  const auto since = Clock::now();
  exchange_for(ch, 0.5, since);
  if (comm.rank() != last) exchange_for(ch, 2.5, since);  // `last` falls silent meanwhile
  const StallStatus mine = waiting_at(7, 3.0);
  const auto named = comm.rank() == last ? std::vector<StalledRank>{} : find_stalled(ch.view(mine, Clock::now(), 1.5));
  if (comm.rank() != last) {
    REQUIRE(named.size() == 1);
    CHECK(named[0].rank == last);
    CHECK(named[0].host == ch.hosts()[static_cast<std::size_t>(last)]);
    CHECK(named[0].last.step == 7);
    CHECK(named[0].why.find("silent") == 0);
  }
  comm.barrier();
}

TEST_CASE("StallChannel: the hub closes a connection without the job's token", "[stall]") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  StallChannel ch(comm, StallChannelOptions{});
  if (comm.rank() == 0 && ch.active()) {
    REQUIRE(!ch.listening().empty());
    const auto [address, port] = ch.listening().front();
    FramedSocket stranger(connect_to(address, port, std::chrono::milliseconds(2000)));
    REQUIRE(stranger.open());
    std::vector<std::byte> hello(24, std::byte{0});  // a hello with a wrong token, as rank 1
    hello[16] = std::byte{1};
    stranger.send_latest(0x52545748, hello);
    bool closed = false;
    for (int i = 0; i < 100 && !closed; ++i) {
      exchange_for(ch, 0.02, Clock::now());
      std::byte b{};
      closed = ::recv(stranger.fd(), &b, 1, MSG_DONTWAIT) == 0;  // EOF: the hub closed it
    }
    CHECK(closed);
  }
  comm.barrier();
}
