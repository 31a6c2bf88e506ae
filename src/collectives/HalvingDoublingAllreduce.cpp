// Recursive halving-doubling all-reduce (see HalvingDoublingAllreduce.h).
//
// Fold (N = p + rem, p the largest power of two <= N): among the first 2*rem ranks, each
// even rank sends its whole vector to the odd rank above it and sits out; the odd rank
// adds it in. The p remaining ranks get new ranks 0..p-1 and run the power-of-two
// algorithm; at the end each odd rank of the fold sends the result back down.
//
// Halving (reduce-scatter): the vector is cut into p blocks. At distance mask = p/2,
// p/4, ..., 1 a rank exchanges half of its current block range with new rank ^ mask,
// keeps the lower half if its mask bit is 0, and adds the partner's copy of it. It ends
// owning the full sum of block new_rank. Doubling (all-gather) retraces the steps with
// mask = 1, 2, ..., p/2, swapping owned ranges straight into place.
#include "collectives/HalvingDoublingAllreduce.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "collectives/EvenPartition.h"
#include "collectives/MpiCheck.h"
#include "collectives/MpiWait.h"
#include "collectives/ReduceKernels.h"

namespace ringtrain {
namespace {

constexpr int kFoldTag = 7101;
constexpr int kStepTag = 7102;
constexpr int kUnfoldTag = 7103;

// MPI counts are int; the vectors here are far below 2^31 elements per message for the
// trainer, but split anyway so a huge vector cannot overflow.
constexpr std::size_t kMaxMessage = 1u << 30;

void checked_size(std::size_t n) {
  if (n > kMaxMessage) {
    throw std::invalid_argument("halving_doubling_allreduce: message of " + std::to_string(n) +
                                " floats exceeds 2^30");
  }
}

// Exchange: send [send, send + send_n) to peer, receive recv_n floats into `recv`.
void exchange(MPI_Comm comm, int peer, int tag, const float* send, std::size_t send_n, float* recv,
              std::size_t recv_n, TrafficStats& stats) {
  checked_size(send_n);
  checked_size(recv_n);
  MPI_Request requests[2];
  RINGTRAIN_MPI_CHECK(
      MPI_Irecv(recv, static_cast<int>(recv_n), MPI_FLOAT, peer, tag, comm, &requests[0]));
  RINGTRAIN_MPI_CHECK(
      MPI_Isend(send, static_cast<int>(send_n), MPI_FLOAT, peer, tag, comm, &requests[1]));
  timed_waitall(2, requests, stats, peer, "exchange");
  stats.bytes_sent += send_n * sizeof(float);
  stats.bytes_received += recv_n * sizeof(float);
}

void send_all(MPI_Comm comm, int peer, int tag, const float* data, std::size_t n,
              TrafficStats& stats) {
  checked_size(n);
  MPI_Request request;
  RINGTRAIN_MPI_CHECK(MPI_Isend(data, static_cast<int>(n), MPI_FLOAT, peer, tag, comm, &request));
  timed_wait(&request, stats, peer, "send");
  stats.bytes_sent += n * sizeof(float);
}

void recv_all(MPI_Comm comm, int peer, int tag, float* data, std::size_t n, TrafficStats& stats) {
  checked_size(n);
  MPI_Request request;
  RINGTRAIN_MPI_CHECK(MPI_Irecv(data, static_cast<int>(n), MPI_FLOAT, peer, tag, comm, &request));
  timed_wait(&request, stats, peer, "receive");
  stats.bytes_received += n * sizeof(float);
}

// Plain recursive doubling among the p = pof2 ranks of the folded job: log2(p) exchanges
// of the whole vector; a + b == b + a in IEEE arithmetic, so partners end with
// bit-identical sums.
template <class RealRank>
void recursive_doubling(MPI_Comm comm, std::span<float> data, int new_rank, int pof2,
                        RealRank real_rank, std::vector<float>& scratch, TrafficStats& stats) {
  const std::size_t count = data.size();
  if (scratch.size() < count) scratch.resize(count);
  for (int mask = 1; mask < pof2; mask *= 2) {
    const int peer = real_rank(new_rank ^ mask);
    exchange(comm, peer, kStepTag, data.data(), count, scratch.data(), count, stats);
    reduce_add(data.data(), scratch.data(), count);
  }
}

// Recursive halving then doubling among the p = pof2 ranks of the folded job; scales the
// block this rank owns after the halving.
template <class RealRank>
void halving_doubling(MPI_Comm comm, std::span<float> data, float scale, int new_rank, int pof2,
                      RealRank real_rank, std::vector<float>& scratch, TrafficStats& stats) {
  const std::size_t count = data.size();
  const auto block_begin = [&](int b) {
    return partition_begin(count, pof2, static_cast<std::size_t>(b));
  };
  int lo = 0;
  int hi = pof2;
  if (scratch.size() < count / 2 + 1) scratch.resize(count / 2 + 1);
  for (int mask = pof2 / 2; mask >= 1; mask /= 2) {
    const int peer = real_rank(new_rank ^ mask);
    const int mid = lo + (hi - lo) / 2;
    const bool keep_low = (new_rank & mask) == 0;
    const int keep_lo = keep_low ? lo : mid;
    const int keep_hi = keep_low ? mid : hi;
    const std::size_t keep_begin = block_begin(keep_lo);
    const std::size_t keep_n = block_begin(keep_hi) - keep_begin;
    const std::size_t send_begin = block_begin(keep_low ? mid : lo);
    const std::size_t send_n = block_begin(keep_low ? hi : mid) - send_begin;
    exchange(comm, peer, kStepTag, data.data() + send_begin, send_n, scratch.data(), keep_n,
             stats);
    reduce_add(data.data() + keep_begin, scratch.data(), keep_n);
    lo = keep_lo;
    hi = keep_hi;
  }
  // This rank now owns the full sum of block new_rank.
  if (scale != 1.0f)
    scale_in_place(data.data() + block_begin(lo), block_begin(hi) - block_begin(lo), scale);
  for (int mask = 1; mask < pof2; mask *= 2) {
    const int peer = real_rank(new_rank ^ mask);
    // The partner owns the adjacent range of the same width.
    const bool low = (new_rank & mask) == 0;
    const int other_lo = low ? hi : lo - mask;
    const int other_hi = low ? hi + mask : lo;
    const std::size_t mine = block_begin(lo);
    const std::size_t theirs = block_begin(other_lo);
    exchange(comm, peer, kStepTag, data.data() + mine, block_begin(hi) - mine,
             data.data() + theirs, block_begin(other_hi) - theirs, stats);
    lo = low ? lo : other_lo;
    hi = low ? other_hi : hi;
  }
}

}  // namespace

void halving_doubling_allreduce(MPI_Comm comm, std::span<float> data, float scale,
                                std::size_t doubling_max_bytes, AllreduceScratch& scratch_space,
                                TrafficStats& stats) {
  std::vector<float>& scratch = scratch_space.f32;
  int rank = 0;
  int size = 1;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size));
  const std::size_t count = data.size();
  int pof2 = 1;
  while (pof2 * 2 <= size) pof2 *= 2;
  const int rem = size - pof2;
  // Real rank of new rank q.
  const auto real_rank = [rem](int q) { return q < rem ? 2 * q + 1 : q + rem; };

  int new_rank = -1;
  if (rank < 2 * rem) {
    if (rank % 2 == 0) {
      send_all(comm, rank + 1, kFoldTag, data.data(), count, stats);
    } else {
      if (scratch.size() < count) scratch.resize(count);
      recv_all(comm, rank - 1, kFoldTag, scratch.data(), count, stats);
      reduce_add(data.data(), scratch.data(), count);
      new_rank = rank / 2;
    }
  } else {
    new_rank = rank - rem;
  }

  if (new_rank >= 0) {
    const bool doubling_only = count * sizeof(float) <= doubling_max_bytes ||
                               count < static_cast<std::size_t>(pof2);
    if (doubling_only) {
      recursive_doubling(comm, data, new_rank, pof2, real_rank, scratch, stats);
      if (scale != 1.0f) scale_in_place(data.data(), count, scale);
    } else {
      halving_doubling(comm, data, scale, new_rank, pof2, real_rank, scratch, stats);
    }
  }

  if (rank < 2 * rem) {
    if (rank % 2 == 1) {
      send_all(comm, rank - 1, kUnfoldTag, data.data(), count, stats);
    } else {
      recv_all(comm, rank + 1, kUnfoldTag, data.data(), count, stats);
    }
  }
}

}  // namespace ringtrain
