// Point-to-point messages between two ranks for protocols that are not collectives (the
// asynchronous parameter server): non-blocking sends and receives of byte buffers, a probe
// for whatever arrives next, and waits that poll with a sleeping back-off instead of
// spinning a core. Owns its own MPI_Comm_dup, so its tags never meet the collectives'.
#pragma once

#include "collectives/Mpi.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "collectives/Communicator.h"
#include "collectives/TrafficStats.h"

namespace ringtrain {

class PeerChannel {
 public:
  // An incoming message found by probe(): who sent it, with which tag, how many bytes.
  struct Arrival {
    int source = 0;
    int tag = 0;
    std::size_t bytes = 0;
  };

  // Collective over comm (it duplicates the communicator). Throws std::invalid_argument
  // when comm is not an MpiCommunicator: point-to-point needs MPI.
  explicit PeerChannel(Communicator& comm);
  ~PeerChannel();
  PeerChannel(const PeerChannel&) = delete;
  PeerChannel& operator=(const PeerChannel&) = delete;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }

  // Non-blocking; the buffer must stay untouched until the request completes.
  MPI_Request isend(std::span<const std::byte> data, int dest, int tag);

  // True once *request completed (it becomes MPI_REQUEST_NULL); a null request is complete.
  bool test(MPI_Request* request);
  // Polls until *request completes: tight for a short while (a reply usually comes within
  // microseconds on one host), then with sleeps doubling up to kMaxSleepUs, so a rank
  // waiting on a slow peer costs almost no CPU. Time spent counts as wait_seconds.
  void wait(MPI_Request* request);

  // The next message from any source (any tag), if one is there; does not receive it.
  // Receiving by probe lets a message's size vary (a reply with or without parameters).
  std::optional<Arrival> probe();
  // Blocking receive of a message probe() reported (it is there: no wait).
  void receive(const Arrival& arrival, std::span<std::byte> data);
  // Non-blocking receive of a message probe() reported, for one too large to take in one
  // call without waiting for its sender (a rendezvous over TCP needs the sender in MPI).
  MPI_Request ireceive(const Arrival& arrival, std::span<std::byte> data);

  // Sleeps as wait() does between polls, for event loops that poll several things:
  // idle_rounds = consecutive polls that found nothing.
  static void back_off(int idle_rounds);

  const TrafficStats& stats() const noexcept { return stats_; }

  static constexpr int kSpinRounds = 200;    // polls before the first sleep
  static constexpr int kMaxSleepUs = 200;    // longest sleep between polls

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  TrafficStats stats_;
};

}  // namespace ringtrain
