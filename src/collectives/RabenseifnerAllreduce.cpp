// Rabenseifner all-reduce (see RabenseifnerAllreduce.h).
//
// Blocks: the vector is cut into p = 2^k near-equal blocks (EvenPartition.h). Halving
// (reduce-scatter) runs the distances mask = 1, 2, ..., p/2 - nearest partner first: a
// rank sends the half of its current block range it gives up, receives the partner's copy
// of the half it keeps and adds it in. Nearest first means that with ranks placed node by
// node (consecutive ranks share a node) the large halves, n/2 then n/4, are exchanged
// inside a node, and only the last, small rounds cross the network. After the halving a
// rank owns the full sum of one block; doubling (all-gather) retraces the rounds in
// reverse, swapping owned ranges straight into place.
//
// Pipelining: each exchange is cut into chunks of at most chunk_bytes on the wire; all
// receives of a round are posted first, then the sends, and chunk c is added while chunk
// c+1 is still arriving. send_window > 0: a rank posts its first send_window chunks at once
// and one more each time a chunk from the partner has arrived, so it runs at most that many
// chunks ahead of its partner (0: the whole round at once).
//
// 16-bit transport: a 16-bit copy of the vector (the wire) at the same offsets. A range is
// narrowed into it just before it is sent, received chunks are widened and added in fp32;
// the owner narrows its finished block into the wire, the all-gather moves wire ranges,
// and every rank widens the whole wire at the end: the same bits everywhere.
//
// Fold (N = p + rem): among the first 2*rem ranks each even rank sends its vector to the
// odd rank above, which adds it in and takes part as new rank r/2; at the end the odd
// rank sends the result back down.
#include "collectives/RabenseifnerAllreduce.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "collectives/EvenPartition.h"
#include "collectives/Fp16Range.h"
#include "collectives/MpiCheck.h"
#include "collectives/MpiWait.h"
#include "collectives/ReduceKernels.h"
#include "common/HalfConvert.h"

namespace ringtrain {
namespace {

constexpr int kRabTag = 7301;

class RabRun {
 public:
  RabRun(MPI_Comm comm, std::span<float> data, float scale, Compression compression,
         std::size_t chunk_bytes, std::size_t send_window, std::span<const int> order,
         AllreduceScratch& scratch, TrafficStats& stats)
      : comm_(comm),
        send_window_(send_window),
        order_(order),
        data_(data),
        scale_(scale),
        compression_(compression),
        compressed_(compression != Compression::kNone),
        scratch_(scratch),
        stats_(stats) {
    RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
    RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size_));
    if (!order_.empty()) {
      if (order_.size() != static_cast<std::size_t>(size_))
        throw std::invalid_argument("rabenseifner_allreduce: order has " +
                                    std::to_string(order_.size()) + " ranks, comm " +
                                    std::to_string(size_));
      rank_ = static_cast<int>(std::find(order_.begin(), order_.end(), rank_) - order_.begin());
    }
    element_bytes_ = compressed_ ? sizeof(std::uint16_t) : sizeof(float);
    chunk_elems_ = std::clamp<std::size_t>(chunk_bytes / element_bytes_, 1, std::size_t{1} << 29);
    while (pof2_ * 2 <= size_) pof2_ *= 2;
    rem_ = size_ - pof2_;
  }

  void run() {
    if (compression_ == Compression::kFp16) scale_ *= fp16_prescale(comm_, data_, stats_);
    const std::size_t count = data_.size();
    // Receive space: a whole vector for the fold, at most half of it otherwise.
    if (compressed_) {
      if (scratch_.u16.size() < 2 * count) scratch_.u16.resize(2 * count);
      wire_ = scratch_.u16.data();
    } else if (scratch_.f32.size() < count) {
      scratch_.f32.resize(count);
    }
    const bool folded_out = rank_ < 2 * rem_ && rank_ % 2 == 0;
    if (rank_ < 2 * rem_) {
      // Fold: whole-vector send (even) or receive-and-add (odd).
      if (folded_out) {
        exchange(comm_rank(rank_ + 1), {0, count}, {0, 0}, true);
      } else {
        exchange(comm_rank(rank_ - 1), {0, 0}, {0, count}, true);
      }
    }
    if (!folded_out) {
      new_rank_ = rank_ < 2 * rem_ ? rank_ / 2 : rank_ - rem_;
      reduce_scatter();
      finish_owned_block();
      all_gather();
    }
    if (rank_ < 2 * rem_) {
      // Unfold: the result goes back to the even rank, as it travels (no re-rounding).
      if (folded_out) {
        exchange(comm_rank(rank_ + 1), {0, 0}, {0, count}, false);
      } else {
        exchange(comm_rank(rank_ - 1), {0, count}, {0, 0}, false, /*on_wire=*/true);
      }
    }
    if (compressed_) widen_scaled(compression_, wire_, data_.data(), count, scale_);
  }

 private:
  using Range = std::pair<std::size_t, std::size_t>;  // [begin, end) in elements

  // The comm rank of new rank q, and of place p in the order.
  int real_rank(int q) const { return comm_rank(q < rem_ ? 2 * q + 1 : q + rem_); }
  int comm_rank(int p) const { return order_.empty() ? p : order_[static_cast<std::size_t>(p)]; }

  std::size_t block_begin(int b) const {
    return partition_begin(data_.size(), static_cast<std::size_t>(pof2_),
                           static_cast<std::size_t>(b));
  }

  void reduce_scatter() {
    lo_ = 0;
    hi_ = pof2_;
    for (int mask = 1; mask < pof2_; mask *= 2) {
      history_.emplace_back(lo_, hi_);
      const int mid = lo_ + (hi_ - lo_) / 2;
      const bool keep_low = (new_rank_ & mask) == 0;
      const Range low{block_begin(lo_), block_begin(mid)};
      const Range high{block_begin(mid), block_begin(hi_)};
      exchange(real_rank(new_rank_ ^ mask), keep_low ? high : low, keep_low ? low : high, true);
      (keep_low ? hi_ : lo_) = mid;
    }
  }

  // This rank holds the full sum of blocks [lo_, hi_): scale it (fp32) or narrow it into
  // the wire, where the all-gather takes it from (16 bit).
  void finish_owned_block() {
    const std::size_t begin = block_begin(lo_);
    const std::size_t n = block_begin(hi_) - begin;
    if (compressed_) {
      narrow(compression_, data_.data() + begin, wire_ + begin, n);
    } else if (scale_ != 1.0f) {
      scale_in_place(data_.data() + begin, n, scale_);
    }
  }

  void all_gather() {
    for (int mask = pof2_ / 2; mask >= 1; mask /= 2) {
      const auto [before_lo, before_hi] = history_.back();
      history_.pop_back();
      const Range mine{block_begin(lo_), block_begin(hi_)};
      const Range theirs = lo_ == before_lo ? Range{block_begin(hi_), block_begin(before_hi)}
                                            : Range{block_begin(before_lo), block_begin(lo_)};
      exchange(real_rank(new_rank_ ^ mask), mine, theirs, false, true);
      lo_ = before_lo;
      hi_ = before_hi;
    }
  }

  void* wire_at(std::size_t offset) {
    return compressed_ ? static_cast<void*>(wire_ + offset)
                       : static_cast<void*>(data_.data() + offset);
  }

  // Sends `out` to `peer` and receives `in` from it, chunk by chunk. reduce: `in` is added
  // into data (through receive space); otherwise it lands in place. on_wire: `out` is
  // already on the wire (16-bit results), so it is not narrowed from data again.
  void exchange(int peer, Range out, Range in, bool reduce, bool on_wire = false) {
    if (compressed_ && !on_wire)
      narrow(compression_, data_.data() + out.first, wire_ + out.first, out.second - out.first);
    requests_.clear();
    for (std::size_t at = in.first; at < in.second; at += chunk_elems_) {
      const int n = static_cast<int>(std::min(chunk_elems_, in.second - at));
      void* dst = !reduce ? wire_at(at)
                  : compressed_ ? static_cast<void*>(wire_ + data_.size() + (at - in.first))
                                : static_cast<void*>(scratch_.f32.data() + (at - in.first));
      requests_.emplace_back();
      RINGTRAIN_MPI_CHECK(MPI_Irecv(dst, n, wire_type(), peer, kRabTag, comm_, &requests_.back()));
    }
    const std::size_t receives = requests_.size();
    const std::size_t sends = (out.second - out.first + chunk_elems_ - 1) / chunk_elems_;
    requests_.reserve(receives + sends);
    std::size_t posted = 0;  // sends posted so far
    const auto post_sends_up_to = [&](std::size_t n) {
      for (; posted < std::min(n, sends); ++posted) {
        const std::size_t at = out.first + posted * chunk_elems_;
        const int count = static_cast<int>(std::min(chunk_elems_, out.second - at));
        requests_.emplace_back();
        RINGTRAIN_MPI_CHECK(
            MPI_Isend(wire_at(at), count, wire_type(), peer, kRabTag, comm_, &requests_.back()));
      }
    };
    post_sends_up_to(send_window_ == 0 ? sends : send_window_);
    for (std::size_t i = 0; i < receives; ++i) {
      timed_wait(&requests_[i], stats_, peer, "receive");
      if (send_window_ != 0) post_sends_up_to(send_window_ + i + 1);
      const std::size_t at = in.first + i * chunk_elems_;
      if (reduce) add_chunk(at, at - in.first, std::min(chunk_elems_, in.second - at));
    }
    post_sends_up_to(sends);  // the partner sent fewer chunks than this rank
    timed_waitall(static_cast<int>(requests_.size() - receives), requests_.data() + receives,
                  stats_, peer, "send");
    stats_.bytes_sent += (out.second - out.first) * element_bytes_;
    stats_.bytes_received += (in.second - in.first) * element_bytes_;
  }

  MPI_Datatype wire_type() const { return compressed_ ? MPI_UINT16_T : MPI_FLOAT; }

  void add_chunk(std::size_t at, std::size_t slot_offset, std::size_t n) {
    if (compressed_) {
      widen_add(compression_, wire_ + data_.size() + slot_offset, data_.data() + at, n);
    } else {
      reduce_add(data_.data() + at, scratch_.f32.data() + slot_offset, n);
    }
  }

  MPI_Comm comm_;
  std::size_t send_window_;  // chunks sent ahead of the partner's (0: all at once)
  std::span<const int> order_;  // comm ranks by place (empty: rank order)
  std::span<float> data_;
  float scale_;  // applied to the finished sums (fp16: times the inverse prescale)
  Compression compression_;
  bool compressed_;
  AllreduceScratch& scratch_;
  TrafficStats& stats_;
  std::uint16_t* wire_ = nullptr;  // 16-bit: data.size() wire, then receive space
  std::size_t element_bytes_ = sizeof(float);
  std::size_t chunk_elems_ = 1;
  int rank_ = 0;  // this rank's place in the order (its comm rank without one)
  int size_ = 1;
  int pof2_ = 1;
  int rem_ = 0;
  int new_rank_ = -1;
  int lo_ = 0;  // owned block range [lo_, hi_)
  int hi_ = 1;
  std::vector<std::pair<int, int>> history_;  // block ranges before each halving round
  std::vector<MPI_Request> requests_;
};

}  // namespace

void rabenseifner_allreduce(MPI_Comm comm, std::span<float> data, float scale,
                            Compression compression, std::size_t chunk_bytes,
                            std::size_t send_window, std::span<const int> order,
                            AllreduceScratch& scratch, TrafficStats& stats) {
  RabRun(comm, data, scale, compression, chunk_bytes, send_window, order, scratch, stats).run();
}

std::uint64_t rab_elements_sent(std::size_t count, int ranks, int rank) {
  if (ranks <= 1) return 0;
  int pof2 = 1;
  while (pof2 * 2 <= ranks) pof2 *= 2;
  const int rem = ranks - pof2;
  if (rank < 2 * rem && rank % 2 == 0) return count;  // folds in, gets the result back
  const int q = rank < 2 * rem ? rank / 2 : rank - rem;
  const auto begin = [&](int b) {
    return partition_begin(count, static_cast<std::size_t>(pof2), static_cast<std::size_t>(b));
  };
  std::uint64_t sent = rank < 2 * rem ? count : 0;  // the odd rank of a fold sends it back
  int lo = 0;
  int hi = pof2;
  std::vector<std::pair<int, int>> history;
  for (int mask = 1; mask < pof2; mask *= 2) {  // halving: the half given up
    history.emplace_back(lo, hi);
    const int mid = lo + (hi - lo) / 2;
    const bool keep_low = (q & mask) == 0;
    sent += keep_low ? begin(hi) - begin(mid) : begin(mid) - begin(lo);
    (keep_low ? hi : lo) = mid;
  }
  for (; !history.empty(); history.pop_back()) {  // doubling: the range owned so far
    sent += begin(hi) - begin(lo);
    std::tie(lo, hi) = history.back();
  }
  return sent;
}

}  // namespace ringtrain
