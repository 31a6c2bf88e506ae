// The stall watchdogs' side channel: a TCP hub on rank 0 that every other rank connects
// to at start, outside MPI, so that a stall can be pinned on the rank that stopped even
// while every thread that could call MPI is blocked inside it (the watchdog thread may not
// call MPI under MPI_THREAD_SERIALIZED, and a SIGSTOPped rank makes no MPI progress).
// Each rank's watchdog thread sends its StallStatus every poll; the hub keeps when it last
// heard from each rank and sends every rank, every poll, the statuses of the ranks that
// stand still (none while the job moves: a few bytes a second). A rank that stops hearing
// from the hub names rank 0. Everything after set-up happens on the watchdog thread.
//
// The door: rank 0 listens only on the address the other ranks reach it at (127.0.0.1
// when they share its host, else the address on a subnet they have, among the interfaces
// Open MPI's TCP transport may use, or the --stall-channel address or interface), on an
// ephemeral port, and keeps a connection only if its first frame carries this job's
// 16-byte token from /dev/urandom (broadcast over MPI at start) and a rank number it
// expects; anything else is closed within seconds.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/Communicator.h"
#include "collectives/SideSocket.h"
#include "collectives/StallStatus.h"
#include "collectives/StallVerdict.h"

namespace ringtrain {

struct StallChannelOptions {
  // "auto", "off", or rank 0's IPv4 address or interface name to listen on.
  std::string listen = "auto";
};

class StallChannel {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kTokenBytes = 16;

  // Collective over comm (main thread, before the watchdog thread starts). When it cannot
  // be set up on every rank it is off on every rank and note() says why; a bad
  // --stall-channel value throws std::invalid_argument on every rank.
  StallChannel(Communicator& comm, const StallChannelOptions& options);
  ~StallChannel();
  StallChannel(const StallChannel&) = delete;
  StallChannel& operator=(const StallChannel&) = delete;

  bool active() const noexcept { return active_; }
  const std::string& note() const noexcept { return note_; }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  const std::vector<std::string>& hosts() const noexcept { return hosts_; }
  // The hub's listening (address, port)s: what a test knocks on.
  const std::vector<std::pair<std::uint32_t, int>>& listening() const noexcept { return listening_; }

  // ---- Watchdog thread only. Never blocks.
  // Sends this rank's status and takes in what arrived (the hub: accepts, checks tokens,
  // sends each rank the ranks that stand still; `still_after_s`: standing still longer than
  // this makes a rank news).
  void exchange(const StallStatus& mine, Clock::time_point now, double still_after_s);
  // What this rank knows of the others now, for find_stalled().
  StallVerdictInput view(const StallStatus& mine, Clock::time_point now, double silence_s) const;

 private:
  struct Pending {
    FramedSocket socket;
    Clock::time_point opened;
  };
  struct Heard {
    bool heard = false;
    bool closed = false;  // the connection ended (the process exited)
    Clock::time_point at;
    StallStatus status;
  };

  void set_up(Communicator& comm, const StallChannelOptions& options);
  void hub_exchange(const StallStatus& mine, Clock::time_point now, double still_after_s);
  void member_exchange(const StallStatus& mine, Clock::time_point now);
  void accept_new(Clock::time_point now);
  void check_pending(Clock::time_point now);
  std::vector<std::byte> table(const StallStatus& mine, Clock::time_point now, double still_after_s) const;
  void read_table(const std::vector<std::byte>& payload, Clock::time_point now);

  int rank_ = 0;
  int size_ = 1;
  bool active_ = false;
  std::string note_;
  std::vector<std::string> hosts_;
  std::array<std::byte, kTokenBytes> token_{};
  Clock::time_point opened_;
  // The hub.
  std::vector<int> listeners_;
  std::vector<std::pair<std::uint32_t, int>> listening_;
  std::vector<Pending> pending_;
  std::vector<FramedSocket> members_;  // by rank (index 0 unused)
  std::vector<Heard> heard_;           // by rank
  // A member.
  FramedSocket hub_;
  Heard hub_heard_;
  std::vector<PeerView> table_;        // the hub's last news of the others
  Clock::time_point table_at_;
};

}  // namespace ringtrain
