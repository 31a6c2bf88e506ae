// Hierarchical all-reduce (see HierarchicalAllreduce.h).
//
// One call, with L ranks on the node and the window's segments in[0..L-1] and result:
//   1. every rank copies its vector into in[own rank];                     barrier
//   2. pipelined over pieces of the vector: ranks 1..L-1 sum piece k over in[0..L-1]
//      (in that order) into result and enter barrier k; the leader waits for barrier k
//      and all-reduces piece k of result with the other leaders, so the additions of
//      piece k+1 run while piece k crosses the network;                   barrier
//   3. every rank copies result into its vector.
// No barrier is needed after 3: the next call writes in[own rank], which nobody reads
// after step 2, and writes result only after its first barrier, which no rank passes
// before it has finished copying out. Barriers go with MPI_Win_sync, the memory-model
// pairing MPI-3 asks for with shared windows (section 11.7 of the standard).
#include "collectives/HierarchicalAllreduce.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "collectives/EvenPartition.h"
#include "collectives/MpiCheck.h"
#include "collectives/MpiWait.h"
#include "collectives/ReduceKernels.h"

namespace ringtrain {
namespace {

constexpr int kSpinsBeforeSleep = 200;
constexpr auto kPollSleep = std::chrono::microseconds(20);

}  // namespace

HierarchicalAllreduce::HierarchicalAllreduce(MPI_Comm node_comm, MPI_Comm leader_comm,
                                             std::size_t piece_bytes)
    : node_comm_(node_comm),
      leader_comm_(leader_comm),
      piece_elems_(std::max<std::size_t>(1, piece_bytes / sizeof(float))) {
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(node_comm_, &node_rank_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(node_comm_, &node_size_));
  if (node_rank_ == 0) {
    if (leader_comm_ == MPI_COMM_NULL)
      throw std::invalid_argument("HierarchicalAllreduce: a node leader needs the leader communicator");
    RINGTRAIN_MPI_CHECK(MPI_Comm_size(leader_comm_, &leaders_));
  }
}

HierarchicalAllreduce::~HierarchicalAllreduce() { release(); }

void HierarchicalAllreduce::release() noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (window_ != MPI_WIN_NULL && !finalized) {
    MPI_Win_unlock_all(window_);
    MPI_Win_free(&window_);
  }
  window_ = MPI_WIN_NULL;
  capacity_ = 0;
  inputs_.clear();
  result_ = nullptr;
}

void HierarchicalAllreduce::reserve(std::size_t count) {
  if (count <= capacity_ && window_ != MPI_WIN_NULL) return;
  // Every rank of the node passes the same count, so all take this collective branch.
  release();
  // Room to grow a little, so slowly growing sizes do not reallocate every call.
  const std::size_t floats = std::max<std::size_t>(count + count / 8, 1024);
  const std::size_t mine = floats * (node_rank_ == 0 ? 2 : 1);
  float* base = nullptr;
  RINGTRAIN_MPI_CHECK(MPI_Win_allocate_shared(static_cast<MPI_Aint>(mine * sizeof(float)),
                                              sizeof(float), MPI_INFO_NULL, node_comm_, &base,
                                              &window_));
  RINGTRAIN_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, window_));
  inputs_.assign(static_cast<std::size_t>(node_size_), nullptr);
  for (int r = 0; r < node_size_; ++r) {
    MPI_Aint size = 0;
    int unit = 0;
    void* pointer = nullptr;
    RINGTRAIN_MPI_CHECK(MPI_Win_shared_query(window_, r, &size, &unit, &pointer));
    inputs_[static_cast<std::size_t>(r)] = static_cast<float*>(pointer);
  }
  result_ = inputs_[0] + floats;
  capacity_ = floats;
}

void HierarchicalAllreduce::node_barrier(TrafficStats& stats, bool sleepy) {
  const auto start = std::chrono::steady_clock::now();
  RINGTRAIN_MPI_CHECK(MPI_Win_sync(window_));
  // Every rank of the node calls the same (non-blocking) barrier; blocking and
  // non-blocking collectives do not match each other.
  MPI_Request request;
  RINGTRAIN_MPI_CHECK(MPI_Ibarrier(node_comm_, &request));
  if (sleepy) {
    // The other ranks of a node wait here for the whole network phase. Spinning would
    // take CPU from the leader and from the kernel's network work whenever cores are
    // shared (always on the emulated cluster), so after a short spin the wait sleeps
    // between tests: that adds at most one sleep to the call.
    int done = 0;
    for (int spins = 0; !done; ++spins) {
      RINGTRAIN_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
      if (!done && spins >= kSpinsBeforeSleep) std::this_thread::sleep_for(kPollSleep);
    }
  } else {
    RINGTRAIN_MPI_CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE));
  }
  RINGTRAIN_MPI_CHECK(MPI_Win_sync(window_));
  stats.wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void HierarchicalAllreduce::run(std::span<float> data, float scale, Compression compression,
                                const AcrossNodes& across, TrafficStats& stats) {
  const std::size_t count = data.size();
  const std::size_t piece = std::max<std::size_t>(1, piece_elems_);
  const std::size_t pieces = (count + piece - 1) / piece;
  const auto piece_size = [&](std::size_t k) { return std::min(piece, count - k * piece); };
  if (node_size_ == 1) {
    // Alone on the node: the node sum is the vector itself. The leaders' all-reduces go
    // piece by piece on every node, so that they match those of the other leaders.
    for (std::size_t k = 0; k < pieces; ++k) {
      const std::span<float> part(data.data() + k * piece, piece_size(k));
      if (leaders_ > 1) {
        across(part, scale, compression);
      } else if (scale != 1.0f) {
        scale_in_place(part.data(), part.size(), scale);
      }
    }
    return;
  }
  reserve(count);
  std::memcpy(inputs_[static_cast<std::size_t>(node_rank_)], data.data(), count * sizeof(float));
  node_barrier(stats, false);

  std::vector<MPI_Request> ready(pieces, MPI_REQUEST_NULL);
  if (node_rank_ == 0) {
    // Piece k is summed once every rank has entered barrier k.
    for (std::size_t k = 0; k < pieces; ++k)
      RINGTRAIN_MPI_CHECK(MPI_Ibarrier(node_comm_, &ready[k]));
    for (std::size_t k = 0; k < pieces; ++k) {
      timed_wait(&ready[k], stats);
      RINGTRAIN_MPI_CHECK(MPI_Win_sync(window_));
      const std::span<float> part(result_ + k * piece, piece_size(k));
      if (leaders_ > 1) {
        across(part, scale, compression);
      } else if (scale != 1.0f) {
        scale_in_place(part.data(), part.size(), scale);
      }
    }
  } else {
    // The other ranks share each piece's additions, in input order 0..L-1 for every
    // element whoever adds it, and run ahead of the leader's network phase.
    const std::size_t helpers = static_cast<std::size_t>(node_size_ - 1);
    const std::size_t helper = static_cast<std::size_t>(node_rank_ - 1);
    for (std::size_t k = 0; k < pieces; ++k) {
      const std::size_t base = k * piece;
      const std::size_t begin = base + partition_begin(piece_size(k), helpers, helper);
      const std::size_t n = partition_size(piece_size(k), helpers, helper);
      std::memcpy(result_ + begin, inputs_[0] + begin, n * sizeof(float));
      for (std::size_t r = 1; r < static_cast<std::size_t>(node_size_); ++r)
        reduce_add(result_ + begin, inputs_[r] + begin, n);
      RINGTRAIN_MPI_CHECK(MPI_Win_sync(window_));
      RINGTRAIN_MPI_CHECK(MPI_Ibarrier(node_comm_, &ready[k]));
    }
    timed_waitall(static_cast<int>(ready.size()), ready.data(), stats);
  }
  node_barrier(stats, /*sleepy=*/node_rank_ != 0);
  std::memcpy(data.data(), result_, count * sizeof(float));
}

}  // namespace ringtrain
