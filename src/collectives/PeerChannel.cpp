// PeerChannel: point-to-point messages with polling waits (see PeerChannel.h).
//
// Why poll with sleeps rather than MPI_Wait: Open MPI's blocking waits busy-poll, so an
// idle parameter server or a worker held back by the staleness bound would each burn a
// full core, taken from the ranks that compute (on an oversubscribed node, from the very
// worker it waits for). A sleep of at most kMaxSleepUs after kSpinRounds empty polls adds
// at most 0.2 ms to a wait that has already lasted that long, against steps of milliseconds.
#include "collectives/PeerChannel.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <stdexcept>
#include <thread>

#include "collectives/MpiCheck.h"
#include "collectives/MpiCommunicator.h"

namespace ringtrain {
namespace {

int checked_count(std::size_t bytes) {
  if (bytes > static_cast<std::size_t>(INT_MAX))
    throw std::invalid_argument("PeerChannel: message larger than INT_MAX bytes");
  return static_cast<int>(bytes);
}

}  // namespace

PeerChannel::PeerChannel(Communicator& comm) {
  auto* mpi = dynamic_cast<MpiCommunicator*>(&comm);
  if (mpi == nullptr)
    throw std::invalid_argument("PeerChannel: point-to-point messages need an MPI communicator");
  RINGTRAIN_MPI_CHECK(MPI_Comm_dup(mpi->comm(), &comm_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

PeerChannel::~PeerChannel() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

MPI_Request PeerChannel::isend(std::span<const std::byte> data, int dest, int tag) {
  MPI_Request request = MPI_REQUEST_NULL;
  RINGTRAIN_MPI_CHECK(MPI_Isend(data.data(), checked_count(data.size()), MPI_BYTE, dest, tag, comm_, &request));
  stats_.bytes_sent += data.size();
  return request;
}

bool PeerChannel::test(MPI_Request* request) {
  if (*request == MPI_REQUEST_NULL) return true;
  int done = 0;
  RINGTRAIN_MPI_CHECK(MPI_Test(request, &done, MPI_STATUS_IGNORE));
  return done != 0;
}

void PeerChannel::back_off(int idle_rounds) {
  if (idle_rounds < kSpinRounds) return;
  const int doublings = std::min(idle_rounds - kSpinRounds, 8);
  const int us = std::min(kMaxSleepUs, 1 << doublings);
  std::this_thread::sleep_for(std::chrono::microseconds(us));
}

void PeerChannel::wait(MPI_Request* request) {
  const auto start = std::chrono::steady_clock::now();
  for (int idle = 0; !test(request); ++idle) back_off(idle);
  stats_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::optional<PeerChannel::Arrival> PeerChannel::probe() {
  int flag = 0;
  MPI_Status status;
  RINGTRAIN_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &status));
  if (!flag) return std::nullopt;
  int count = 0;
  RINGTRAIN_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
  return Arrival{status.MPI_SOURCE, status.MPI_TAG, static_cast<std::size_t>(count)};
}

void PeerChannel::receive(const Arrival& arrival, std::span<std::byte> data) {
  if (data.size() < arrival.bytes)
    throw std::invalid_argument("PeerChannel::receive: buffer smaller than the message");
  RINGTRAIN_MPI_CHECK(MPI_Recv(data.data(), checked_count(arrival.bytes), MPI_BYTE, arrival.source, arrival.tag,
                               comm_, MPI_STATUS_IGNORE));
  stats_.bytes_received += arrival.bytes;
}

MPI_Request PeerChannel::ireceive(const Arrival& arrival, std::span<std::byte> data) {
  if (data.size() < arrival.bytes)
    throw std::invalid_argument("PeerChannel::ireceive: buffer smaller than the message");
  MPI_Request request = MPI_REQUEST_NULL;
  RINGTRAIN_MPI_CHECK(MPI_Irecv(data.data(), checked_count(arrival.bytes), MPI_BYTE, arrival.source, arrival.tag,
                                comm_, &request));
  stats_.bytes_received += arrival.bytes;
  return request;
}

}  // namespace ringtrain
