// Measures AllreduceCostModel's parameters (see CostCalibration.h).
#include "collectives/CostCalibration.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "collectives/MpiCheck.h"
#include "collectives/ReduceKernels.h"

namespace ringtrain {
namespace {

constexpr int kCalibrationTag = 7401;
constexpr std::size_t kStreamBytes = std::size_t{16} << 20;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best half round trip of an 8-byte message between rank 0 and peer.
double ping_pong(MPI_Comm comm, int rank, int peer) {
  double best = std::numeric_limits<double>::max();
  char byte[8] = {};
  for (int i = 0; i < 220; ++i) {
    const double start = now();
    if (rank == 0) {
      RINGTRAIN_MPI_CHECK(MPI_Send(byte, 8, MPI_BYTE, peer, kCalibrationTag, comm));
      RINGTRAIN_MPI_CHECK(MPI_Recv(byte, 8, MPI_BYTE, peer, kCalibrationTag, comm, MPI_STATUS_IGNORE));
    } else {
      RINGTRAIN_MPI_CHECK(MPI_Recv(byte, 8, MPI_BYTE, 0, kCalibrationTag, comm, MPI_STATUS_IGNORE));
      RINGTRAIN_MPI_CHECK(MPI_Send(byte, 8, MPI_BYTE, 0, kCalibrationTag, comm));
    }
    if (i >= 20) best = std::min(best, (now() - start) / 2);
  }
  return best;
}

// Best seconds per byte of a two-way stream of kStreamBytes in `chunk`-byte messages.
double stream(MPI_Comm comm, int other, std::size_t chunk) {
  std::vector<char> out(kStreamBytes, 1);
  std::vector<char> in(kStreamBytes);
  double best = std::numeric_limits<double>::max();
  for (int round = 0; round < 4; ++round) {
    std::vector<MPI_Request> requests;
    // Start together: a zero-byte exchange between the two (the other ranks are not here).
    RINGTRAIN_MPI_CHECK(MPI_Sendrecv(nullptr, 0, MPI_BYTE, other, kCalibrationTag, nullptr, 0,
                                     MPI_BYTE, other, kCalibrationTag, comm, MPI_STATUS_IGNORE));
    const double start = now();
    for (std::size_t at = 0; at < kStreamBytes; at += chunk) {
      const int n = static_cast<int>(std::min(chunk, kStreamBytes - at));
      requests.emplace_back();
      RINGTRAIN_MPI_CHECK(MPI_Irecv(in.data() + at, n, MPI_BYTE, other, kCalibrationTag, comm, &requests.back()));
      requests.emplace_back();
      RINGTRAIN_MPI_CHECK(MPI_Isend(out.data() + at, n, MPI_BYTE, other, kCalibrationTag, comm, &requests.back()));
    }
    RINGTRAIN_MPI_CHECK(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
    if (round > 0) best = std::min(best, (now() - start) / static_cast<double>(kStreamBytes));
  }
  return best;
}

double reduction_rate() {
  std::vector<float> dst(kStreamBytes / sizeof(float), 1.0f);
  const std::vector<float> src(dst.size(), 0.5f);
  double best = std::numeric_limits<double>::max();
  for (int round = 0; round < 4; ++round) {
    const double start = now();
    reduce_add(dst.data(), src.data(), dst.size());
    if (round > 0) best = std::min(best, (now() - start) / static_cast<double>(kStreamBytes));
  }
  return best;
}

// Best seconds per byte of a memcpy of kStreamBytes (hier's copies into and out of its window).
double copy_rate() {
  const std::vector<char> src(kStreamBytes, 1);
  std::vector<char> dst(kStreamBytes, 0);
  double best = std::numeric_limits<double>::max();
  for (int round = 0; round < 4; ++round) {
    const double start = now();
    std::memcpy(dst.data(), src.data(), kStreamBytes);
    if (round > 0) best = std::min(best, (now() - start) / static_cast<double>(kStreamBytes));
  }
  return best;
}

}  // namespace

AllreduceCostModel calibrate_cost_model(MpiCommunicator& comm, const AllreduceCostModel& base) {
  if (comm.size() < 2) throw std::invalid_argument("--calibrate needs at least 2 ranks");
  // The node order starts with rank 0's node, so its last rank is on another node when
  // there are several (on one host the "link" is shared memory).
  const int peer = comm.ring_order().back();
  const int rank = comm.rank();
  double values[5] = {0, 0, 0, 0, 0};
  if (rank == 0 || rank == peer) {
    const int other = rank == 0 ? peer : 0;
    values[0] = ping_pong(comm.comm(), rank, peer);
    values[1] = stream(comm.comm(), other, comm.allreduce_tuning().ring_chunk_bytes_network);
    const double whole = std::max(4 * base.eager_limit_bytes, double(std::size_t{1} << 20));
    values[2] = stream(comm.comm(), other, static_cast<std::size_t>(std::min(whole, double(kStreamBytes))));
  }
  if (rank == 0) {
    values[3] = reduction_rate();
    values[4] = copy_rate();
  }
  RINGTRAIN_MPI_CHECK(MPI_Bcast(values, 5, MPI_DOUBLE, 0, comm.comm()));
  AllreduceCostModel model = base;
  model.alpha_s = values[0];
  model.beta_s_per_byte = values[1];
  model.rendezvous_beta_s_per_byte = values[2];
  model.gamma_s_per_byte = values[3];
  model.copy_s_per_byte = values[4];
  return model;
}

}  // namespace ringtrain
