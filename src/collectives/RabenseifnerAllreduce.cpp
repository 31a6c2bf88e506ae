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
//
// Lanes: the vector is cut into k parts, each with the whole of the above (fold, rounds,
// unfold) as a list of stages, the same number on every rank (a stage without an exchange
// for this rank is empty), and its own tag. All lanes post their first stage at once; then
// the rank finishes stage s of lane 0, posts lane 0's stage s+1, finishes stage s of lane
// 1, and so on. One lane is exactly the plain sequence of exchanges. With several, a lane's
// next round starts while the other lanes' bytes of the current one are still on the link,
// so its latency no longer stands between the rounds' transfers. Why a fixed order and not
// whichever lane's data comes first (MPI_Waitany): every rank must take the same order for
// the argument in run() that it cannot deadlock, and the simulator replays a recorded
// order of waits, which must not depend on timing.
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

constexpr int kRabTag = 7301;  // lane l sends with tag kRabTag + l, kMaxRabLanes tags at most

class RabRun {
 public:
  RabRun(MPI_Comm comm, std::span<float> data, float scale, Compression compression,
         std::size_t chunk_bytes, std::size_t send_window, std::span<const int> order, int lanes,
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
    if (lanes < 1 || lanes > kMaxRabLanes)
      throw std::invalid_argument("rabenseifner_allreduce: lanes must be 1-" + std::to_string(kMaxRabLanes) +
                                  ", got " + std::to_string(lanes));
    element_bytes_ = compressed_ ? sizeof(std::uint16_t) : sizeof(float);
    chunk_elems_ = std::clamp<std::size_t>(chunk_bytes / element_bytes_, 1, std::size_t{1} << 29);
    while (pof2_ * 2 <= size_) pof2_ *= 2;
    rem_ = size_ - pof2_;
    lanes_.resize(static_cast<std::size_t>(lanes));
  }

  void run() {
    if (compression_ == Compression::kFp16) scale_ *= fp16_prescale(comm_, data_, stats_);
    const std::size_t count = data_.size();
    // Receive space: a whole vector for the fold, at most half of it otherwise; lane l
    // receives at its own offset, so the lanes never share it.
    if (compressed_) {
      if (scratch_.u16.size() < 2 * count) scratch_.u16.resize(2 * count);
      wire_ = scratch_.u16.data();
    } else if (scratch_.f32.size() < count) {
      scratch_.f32.resize(count);
    }
    const std::size_t lanes = lanes_.size();
    for (std::size_t l = 0; l < lanes; ++l)
      plan_lane(static_cast<int>(l), partition_begin(count, lanes, l), partition_begin(count, lanes, l + 1));
    if (pof2_ == 1)  // one rank: nothing to exchange, the sum is this rank's own vector
      for (Lane& lane : lanes_) finish_owned_block(lane.owned);
    // Every lane has the same stages (empty where this rank has no exchange), and every
    // rank finishes them in the same order: stage by stage, lane by lane within a stage,
    // starting a lane's next stage as soon as its current one is done. A rank's exchange
    // (stage s, lane l) needs only its partner's (s, l), which the partner reaches once it
    // has finished every earlier (stage, lane) pair; so the order cannot deadlock, with or
    // without the send window. With one lane this is the plain sequence of exchanges.
    for (Lane& lane : lanes_) start(lane, 0);
    const std::size_t stages = lanes_.front().stages.size();
    for (std::size_t s = 0; s < stages; ++s) {
      for (Lane& lane : lanes_) {
        finish(lane, s);
        if (s + 1 < stages) start(lane, s + 1);
      }
    }
    if (compressed_) widen_scaled(compression_, wire_, data_.data(), count, scale_);
  }

 private:
  using Range = std::pair<std::size_t, std::size_t>;  // [begin, end) in elements

  // One exchange of a lane: send `out` to `peer` and receive `in` from it (peer < 0: this
  // rank has no exchange in the stage). reduce: `in` is added into data; otherwise it lands
  // in place. on_wire: `out` is already on the wire (16-bit results). owned_first: the
  // lane's owned block is finished (scaled or narrowed) before this exchange starts.
  struct Exchange {
    int peer = -1;
    Range out{0, 0};
    Range in{0, 0};
    bool reduce = false;
    bool on_wire = false;
    bool owned_first = false;
  };

  // A part of the vector with its own complete Rabenseifner: the fold, reduce-scatter
  // rounds, all-gather rounds and the unfold, as stages; and the MPI requests of the stage
  // in flight (receives first, then sends).
  struct Lane {
    int tag = kRabTag;
    std::size_t begin = 0;  // the lane's first element (its receive space starts there too)
    Range owned{0, 0};      // the block this rank sums for the lane
    std::vector<Exchange> stages;
    std::vector<MPI_Request> requests;
    std::size_t receives = 0;
    std::size_t sends = 0;
    std::size_t posted = 0;  // sends posted so far
  };

  // The comm rank of new rank q, and of place p in the order.
  int real_rank(int q) const { return comm_rank(q < rem_ ? 2 * q + 1 : q + rem_); }
  int comm_rank(int p) const { return order_.empty() ? p : order_[static_cast<std::size_t>(p)]; }

  // Stages, the same count on every rank: fold, log2 q halving rounds, log2 q doubling
  // rounds, unfold.
  void plan_lane(int l, std::size_t begin, std::size_t end) {
    Lane& lane = lanes_[static_cast<std::size_t>(l)];
    lane.tag = kRabTag + l;
    lane.begin = begin;
    lane.owned = {begin, end};
    int rounds = 0;
    for (int mask = 1; mask < pof2_; mask *= 2) ++rounds;
    lane.stages.assign(static_cast<std::size_t>(2 * rounds + 2), Exchange{});
    const auto block_begin = [&](int b) {
      return begin + partition_begin(end - begin, static_cast<std::size_t>(pof2_), static_cast<std::size_t>(b));
    };
    const bool folded_out = rank_ < 2 * rem_ && rank_ % 2 == 0;
    if (rank_ < 2 * rem_) {
      // Fold: whole-lane send (even) or receive-and-add (odd); unfold: the result goes
      // back to the even rank, as it travels (no re-rounding).
      const Range all{begin, end}, none{begin, begin};
      if (folded_out) {
        lane.stages.front() = {comm_rank(rank_ + 1), all, none, true, false, false};
        lane.stages.back() = {comm_rank(rank_ + 1), none, all, false, false, false};
      } else {
        lane.stages.front() = {comm_rank(rank_ - 1), none, all, true, false, false};
        lane.stages.back() = {comm_rank(rank_ - 1), all, none, false, true, false};
      }
    }
    if (folded_out) return;
    const int new_rank = rank_ < 2 * rem_ ? rank_ / 2 : rank_ - rem_;
    // Halving: nearest partner first; a rank sends the half of its block range it gives
    // up and receives the partner's copy of the half it keeps.
    int lo = 0;
    int hi = pof2_;
    std::vector<std::pair<int, int>> history;  // block ranges before each halving round
    std::size_t stage = 1;
    for (int mask = 1; mask < pof2_; mask *= 2, ++stage) {
      history.emplace_back(lo, hi);
      const int mid = lo + (hi - lo) / 2;
      const bool keep_low = (new_rank & mask) == 0;
      const Range low{block_begin(lo), block_begin(mid)};
      const Range high{block_begin(mid), block_begin(hi)};
      lane.stages[stage] = {real_rank(new_rank ^ mask), keep_low ? high : low, keep_low ? low : high, true, false,
                            false};
      (keep_low ? hi : lo) = mid;
    }
    lane.owned = {block_begin(lo), block_begin(hi)};
    // Doubling: retrace the rounds in reverse, swapping owned ranges straight into place.
    for (int mask = pof2_ / 2; mask >= 1; mask /= 2, ++stage) {
      const auto [before_lo, before_hi] = history.back();
      history.pop_back();
      const Range mine{block_begin(lo), block_begin(hi)};
      const Range theirs = lo == before_lo ? Range{block_begin(hi), block_begin(before_hi)}
                                           : Range{block_begin(before_lo), block_begin(lo)};
      lane.stages[stage] = {real_rank(new_rank ^ mask), mine, theirs, false, true, mask == pof2_ / 2};
      lo = before_lo;
      hi = before_hi;
    }
  }

  // This rank holds the full sum of `owned`: scale it (fp32) or narrow it into the wire,
  // where the all-gather takes it from (16 bit).
  void finish_owned_block(Range owned) {
    const std::size_t n = owned.second - owned.first;
    if (compressed_) {
      narrow(compression_, data_.data() + owned.first, wire_ + owned.first, n);
    } else if (scale_ != 1.0f) {
      scale_in_place(data_.data() + owned.first, n, scale_);
    }
  }

  void* wire_at(std::size_t offset) {
    return compressed_ ? static_cast<void*>(wire_ + offset)
                       : static_cast<void*>(data_.data() + offset);
  }

  // Where a reduce exchange of `lane` receives the element at `at`.
  void* receive_slot(const Lane& lane, const Exchange& x, std::size_t at) {
    const std::size_t slot = lane.begin + (at - x.in.first);
    return compressed_ ? static_cast<void*>(wire_ + data_.size() + slot)
                       : static_cast<void*>(scratch_.f32.data() + slot);
  }

  // Posts the stage's receives, chunk by chunk, and its first sends (all of them, or
  // send_window of them).
  void start(Lane& lane, std::size_t stage) {
    const Exchange& x = lane.stages[stage];
    if (x.peer < 0) return;
    if (x.owned_first) finish_owned_block(lane.owned);
    if (compressed_ && !x.on_wire)
      narrow(compression_, data_.data() + x.out.first, wire_ + x.out.first, x.out.second - x.out.first);
    lane.requests.clear();
    for (std::size_t at = x.in.first; at < x.in.second; at += chunk_elems_) {
      const int n = static_cast<int>(std::min(chunk_elems_, x.in.second - at));
      void* dst = x.reduce ? receive_slot(lane, x, at) : wire_at(at);
      lane.requests.emplace_back();
      RINGTRAIN_MPI_CHECK(MPI_Irecv(dst, n, wire_type(), x.peer, lane.tag, comm_, &lane.requests.back()));
    }
    lane.receives = lane.requests.size();
    lane.sends = (x.out.second - x.out.first + chunk_elems_ - 1) / chunk_elems_;
    lane.requests.reserve(lane.receives + lane.sends);
    lane.posted = 0;
    post_sends_up_to(lane, x, send_window_ == 0 ? lane.sends : send_window_);
  }

  void post_sends_up_to(Lane& lane, const Exchange& x, std::size_t n) {
    for (; lane.posted < std::min(n, lane.sends); ++lane.posted) {
      const std::size_t at = x.out.first + lane.posted * chunk_elems_;
      const int count = static_cast<int>(std::min(chunk_elems_, x.out.second - at));
      lane.requests.emplace_back();
      RINGTRAIN_MPI_CHECK(
          MPI_Isend(wire_at(at), count, wire_type(), x.peer, lane.tag, comm_, &lane.requests.back()));
    }
  }

  // Waits for the stage's chunks in order, adding each (reduce) while the next is still
  // arriving, and with a send window posts one more send per chunk received; then waits
  // for the sends.
  void finish(Lane& lane, std::size_t stage) {
    const Exchange& x = lane.stages[stage];
    if (x.peer < 0) return;
    for (std::size_t i = 0; i < lane.receives; ++i) {
      timed_wait(&lane.requests[i], stats_, x.peer, "receive");
      if (send_window_ != 0) post_sends_up_to(lane, x, send_window_ + i + 1);
      const std::size_t at = x.in.first + i * chunk_elems_;
      if (x.reduce) add_chunk(lane, x, at, std::min(chunk_elems_, x.in.second - at));
    }
    post_sends_up_to(lane, x, lane.sends);  // the partner sent fewer chunks than this rank
    timed_waitall(static_cast<int>(lane.requests.size() - lane.receives), lane.requests.data() + lane.receives,
                  stats_, x.peer, "send");
    stats_.bytes_sent += (x.out.second - x.out.first) * element_bytes_;
    stats_.bytes_received += (x.in.second - x.in.first) * element_bytes_;
  }

  MPI_Datatype wire_type() const { return compressed_ ? MPI_UINT16_T : MPI_FLOAT; }

  void add_chunk(const Lane& lane, const Exchange& x, std::size_t at, std::size_t n) {
    if (compressed_) {
      widen_add(compression_, static_cast<const std::uint16_t*>(receive_slot(lane, x, at)), data_.data() + at, n);
    } else {
      reduce_add(data_.data() + at, static_cast<const float*>(receive_slot(lane, x, at)), n);
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
  std::vector<Lane> lanes_;
};

}  // namespace

void rabenseifner_allreduce(MPI_Comm comm, std::span<float> data, float scale,
                            Compression compression, std::size_t chunk_bytes,
                            std::size_t send_window, std::span<const int> order, int lanes,
                            AllreduceScratch& scratch, TrafficStats& stats) {
  RabRun(comm, data, scale, compression, chunk_bytes, send_window, order, lanes, scratch, stats).run();
}

std::uint64_t rab_elements_sent(std::size_t count, int ranks, int rank, int lanes) {
  std::uint64_t sent = 0;
  const auto parts = static_cast<std::size_t>(std::max(lanes, 1));
  for (std::size_t l = 0; l < parts; ++l)
    sent += rab_elements_sent(partition_begin(count, parts, l + 1) - partition_begin(count, parts, l), ranks, rank);
  return sent;
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
