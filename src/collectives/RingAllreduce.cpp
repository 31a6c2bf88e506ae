// Ring all-reduce: N-1 reduce-scatter steps then N-1 all-gather steps, streamed chunk by
// chunk so that a chunk is forwarded to the right neighbour as soon as it is reduced.
//
// Segments: the buffer is split into N near-equal segments (EvenPartition.h).
// Reduce-scatter step s (0..N-2): rank r sends segment r-s and receives segment r-s-1
// (mod N), which it adds into its own copy. (r is the ring position: the rank, or its
// place in RingOptions::order.) After step N-2, rank r owns the full sum of
// segment r+1. All-gather step t (0..N-2): rank r sends segment r+1-t and receives
// segment r-t. Per rank that is 2(N-1) segments of count/N elements, the 2(N-1)/N bound
// of Patarasuk & Yuan (2009).
//
// Pipelining: every segment is cut into chunks of options.chunk_bytes on the wire. The
// receives of a rank form one ordered stream (reduce-scatter chunks, then all-gather
// chunks) which matches, message for message, the send stream of its left neighbour (MPI
// keeps the order of messages between a pair on one communicator and tag). Receives are
// posted `recv_depth` items ahead (reduce-scatter ones into a rotating set of scratch
// chunks), so the transfer of chunk k+1 runs while chunk k is reduced, and the reduced
// chunk is sent on (non-blocking) at once, which pipelines across steps.
//
// The wire: fp32 transport sends straight from `data` and receives all-gather chunks in
// place. 16-bit transport keeps a 16-bit copy of the vector (the wire) at the same
// offsets: a chunk is narrowed into it just before it is sent, reduce-scatter chunks are
// widened and added in fp32, all-gather chunks are received into the wire, forwarded from
// there unchanged and widened into `data`. The owner of a reduced segment widens its own
// narrowed copy too, so every rank ends with the same values.
#include "collectives/RingAllreduce.h"

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "collectives/EvenPartition.h"
#include "collectives/Fp16Range.h"
#include "collectives/MpiCheck.h"
#include "collectives/MpiWait.h"
#include "collectives/ReduceKernels.h"
#include "common/HalfConvert.h"

namespace ringtrain {
namespace {

constexpr int kRingTag = 7001;

// One chunk of the receive stream (or of the send stream).
struct RingItem {
  bool all_gather;     // false: reduce-scatter
  int step;            // 0..N-2 within its phase
  std::size_t offset;  // first element in data
  int count;           // elements
  // Position in the lexicographic (phase, step, chunk) order, used to find sends.
  std::uint64_t key;
};

class RingRun {
 public:
  RingRun(MPI_Comm comm, std::span<float> data, float scale, Compression compression,
          const RingOptions& options, AllreduceScratch& scratch, TrafficStats& stats)
      : comm_(comm),
        data_(data),
        scale_(scale),
        compression_(compression),
        compressed_(compression != Compression::kNone),
        scratch_(scratch),
        stats_(stats) {
    RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
    RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size_));
    // Ring position and neighbours: by rank, or by options.order (a permutation of ranks).
    pos_ = rank_;
    if (!options.order.empty()) {
      if (options.order.size() != static_cast<std::size_t>(size_))
        throw std::invalid_argument("ring_allreduce: order has " +
                                    std::to_string(options.order.size()) + " ranks, comm " +
                                    std::to_string(size_));
      pos_ = static_cast<int>(std::find(options.order.begin(), options.order.end(), rank_) -
                              options.order.begin());
    }
    const auto at = [&](int p) { return options.order.empty() ? p : options.order[p]; };
    left_ = at((pos_ + size_ - 1) % size_);
    right_ = at((pos_ + 1) % size_);
    element_bytes_ = compressed_ ? sizeof(std::uint16_t) : sizeof(float);
    chunk_elems_ = std::max<std::size_t>(1, options.chunk_bytes / element_bytes_);
    chunk_elems_ = std::min<std::size_t>(chunk_elems_, 1u << 29);  // pieces < 2^30: int counts
    depth_ = std::max(1, options.recv_depth);
    chunk_is_limit_ = options.chunk_is_limit;
  }

  void run() {
    // fp16: bring every partial sum into fp16's range first (Fp16Range.h).
    if (compression_ == Compression::kFp16) scale_ *= fp16_prescale(comm_, data_, stats_);
    build_receive_stream();
    // Receive slots for reduce-scatter: depth_ chunks (a chunk is never larger than a
    // segment, so small buffers need little scratch). Segments differ by at most one
    // element: the two sizes bound the piece length.
    slot_elems_ = std::max(piece_length(partition_size(data_.size(), size_, 0)),
                           piece_length(partition_size(data_.size(), size_, size_ - 1)));
    const std::size_t slots = slot_elems_ * static_cast<std::size_t>(depth_);
    if (compressed_) {
      if (scratch_.u16.size() < data_.size() + slots) scratch_.u16.resize(data_.size() + slots);
      wire_ = scratch_.u16.data();
    } else if (scratch_.f32.size() < slots) {
      scratch_.f32.resize(slots);
    }
    recv_requests_.assign(static_cast<std::size_t>(depth_), MPI_REQUEST_NULL);

    // Reduce-scatter step 0: send segment r as it is.
    for_each_chunk(segment(pos_), [&](std::size_t offset, int count, std::uint64_t chunk) {
      to_wire(offset, count);
      send(offset, count, key_of(false, 0, chunk));
    });
    for (std::size_t i = 0; i < std::min<std::size_t>(depth_, recvs_.size()); ++i) post_receive(i);

    for (std::size_t i = 0; i < recvs_.size(); ++i) {
      const RingItem& item = recvs_[i];
      const std::size_t slot = i % static_cast<std::size_t>(depth_);
      timed_wait(&recv_requests_[slot], stats_, left_, "receive");
      stats_.bytes_received += static_cast<std::uint64_t>(item.count) * element_bytes_;
      const bool last_reduce = !item.all_gather && item.step == size_ - 2;
      if (!item.all_gather) {
        reduce(item, slot, last_reduce);
      } else if (compressed_) {
        widen_scaled(compression_, wire_ + item.offset, data_.data() + item.offset,
                     static_cast<std::size_t>(item.count), scale_);
      }
      // The slot is free again: keep `depth_` receives in flight.
      if (i + depth_ < recvs_.size()) post_receive(i + depth_);
      // Forward: reduce-scatter step s feeds step s+1; the last one starts the
      // all-gather; all-gather step t feeds step t+1.
      const std::uint64_t chunk = item.key % kChunkRadix;
      if (!item.all_gather) {
        send(item.offset, item.count, key_of(last_reduce, last_reduce ? 0 : item.step + 1, chunk));
      } else if (item.step < size_ - 2) {
        send(item.offset, item.count, key_of(true, item.step + 1, chunk));
      }
    }
    // Sends still in flight.
    std::vector<MPI_Request> pending;
    for (auto& s : sends_) pending.push_back(s.request);
    sends_.clear();
    timed_waitall(static_cast<int>(pending.size()), pending.data(), stats_, right_, "send");
  }

 private:
  static constexpr std::uint64_t kChunkRadix = 1ull << 32;

  struct PendingSend {
    std::uint64_t key;
    MPI_Request request;
  };

  std::uint64_t key_of(bool all_gather, int step, std::uint64_t chunk) const {
    const std::uint64_t phase_step = static_cast<std::uint64_t>(all_gather ? size_ + step : step);
    return phase_step * kChunkRadix + chunk;
  }

  // [begin, end) of segment i (mod N).
  std::pair<std::size_t, std::size_t> segment(int i) const {
    const std::size_t s = static_cast<std::size_t>(((i % size_) + size_) % size_);
    const std::size_t begin = partition_begin(data_.size(), size_, s);
    return {begin, begin + partition_size(data_.size(), size_, s)};
  }

  // Chunk length for a segment of `n` elements. A segment of up to two chunks goes whole:
  // measured on shared memory (np 2, 4 and 8 MiB), a segment cut into exactly two large
  // chunks ran 10-50% slower than the same segment whole or cut into four or more. Not
  // when the chunk is a limit (across hosts): there a whole 87 KiB segment (256 KiB at
  // np 3) crossed the TCP eager limit and took 7.4 ms against 5.1 ms for 512 KiB
  // (docs/benchmarks/allreduce-targets.md).
  std::size_t piece_length(std::size_t n) const {
    if (n <= chunk_elems_) return n;
    return !chunk_is_limit_ && n <= 2 * chunk_elems_ ? n : chunk_elems_;
  }

  template <class F>
  void for_each_chunk(std::pair<std::size_t, std::size_t> range, F&& f) const {
    const std::size_t piece = piece_length(range.second - range.first);
    std::uint64_t chunk = 0;
    for (std::size_t offset = range.first; offset < range.second; offset += piece) {
      const std::size_t n = std::min(piece, range.second - offset);
      f(offset, static_cast<int>(n), chunk++);
    }
  }

  void build_receive_stream() {
    for (int s = 0; s + 1 < size_; ++s) {
      for_each_chunk(segment(pos_ - s - 1), [&](std::size_t offset, int count, std::uint64_t c) {
        recvs_.push_back({false, s, offset, count, key_of(false, s, c)});
      });
    }
    for (int t = 0; t + 1 < size_; ++t) {
      for_each_chunk(segment(pos_ - t), [&](std::size_t offset, int count, std::uint64_t c) {
        recvs_.push_back({true, t, offset, count, key_of(true, t, c)});
      });
    }
  }

  // 16-bit transport: narrow data[offset, offset + count) into the wire before sending.
  void to_wire(std::size_t offset, int count) {
    if (compressed_)
      narrow(compression_, data_.data() + offset, wire_ + offset, static_cast<std::size_t>(count));
  }

  // Adds a received reduce-scatter chunk into data. The last step completes the sum of
  // this rank's segment: scaled (fp32) or narrowed for sending and widened back (16 bit).
  void reduce(const RingItem& item, std::size_t slot, bool last) {
    float* dst = data_.data() + item.offset;
    const std::size_t n = static_cast<std::size_t>(item.count);
    if (!compressed_) {
      const float* src = scratch_.f32.data() + slot * slot_elems_;
      if (last && scale_ != 1.0f) {
        reduce_add_scale(dst, src, n, scale_);
      } else {
        reduce_add(dst, src, n);
      }
      return;
    }
    const std::uint16_t* src = wire_ + data_.size() + slot * slot_elems_;
    widen_add(compression_, src, dst, n);
    to_wire(item.offset, item.count);
    if (last) widen_scaled(compression_, wire_ + item.offset, dst, n, scale_);
  }

  void* wire_at(std::size_t offset) {
    return compressed_ ? static_cast<void*>(wire_ + offset)
                       : static_cast<void*>(data_.data() + offset);
  }

  MPI_Datatype wire_type() const { return compressed_ ? MPI_UINT16_T : MPI_FLOAT; }

  void post_receive(std::size_t i) {
    const RingItem& item = recvs_[i];
    const std::size_t slot = i % static_cast<std::size_t>(depth_);
    void* dst;
    if (item.all_gather) {
      // Receiving in place overwrites segment r-t, which this rank sent in reduce-scatter
      // step t: that send must be complete before the buffer may change.
      complete_sends_up_to(key_of(false, item.step, item.key % kChunkRadix));
      dst = wire_at(item.offset);
    } else if (compressed_) {
      dst = wire_ + data_.size() + slot * slot_elems_;
    } else {
      dst = scratch_.f32.data() + slot * slot_elems_;
    }
    RINGTRAIN_MPI_CHECK(
        MPI_Irecv(dst, item.count, wire_type(), left_, kRingTag, comm_, &recv_requests_[slot]));
  }

  void send(std::size_t offset, int count, std::uint64_t key) {
    MPI_Request request;
    RINGTRAIN_MPI_CHECK(
        MPI_Isend(wire_at(offset), count, wire_type(), right_, kRingTag, comm_, &request));
    stats_.bytes_sent += static_cast<std::uint64_t>(count) * element_bytes_;
    sends_.push_back({key, request});
  }

  // Sends are issued in increasing key order, so the deque is sorted.
  void complete_sends_up_to(std::uint64_t key) {
    while (!sends_.empty() && sends_.front().key <= key) {
      timed_wait(&sends_.front().request, stats_, right_, "send");
      sends_.pop_front();
    }
  }

  MPI_Comm comm_;
  std::span<float> data_;
  float scale_;  // applied to the finished sums (fp16: times the inverse prescale)
  Compression compression_;
  bool compressed_;
  AllreduceScratch& scratch_;  // owned by the caller, reused across calls
  TrafficStats& stats_;
  std::uint16_t* wire_ = nullptr;  // 16-bit transport: data.size() wire + receive slots
  std::size_t element_bytes_ = sizeof(float);
  int rank_ = 0;
  int pos_ = 0;  // position in the ring (== rank_ without an order)
  int size_ = 1;
  int left_ = 0;
  int right_ = 0;
  std::size_t chunk_elems_ = 1;
  std::size_t slot_elems_ = 1;
  int depth_ = 2;
  bool chunk_is_limit_ = false;
  std::vector<RingItem> recvs_;
  std::vector<MPI_Request> recv_requests_;
  std::deque<PendingSend> sends_;
};

}  // namespace

void ring_allreduce(MPI_Comm comm, std::span<float> data, float scale, Compression compression,
                    const RingOptions& options, AllreduceScratch& scratch, TrafficStats& stats) {
  RingRun(comm, data, scale, compression, options, scratch, stats).run();
}

std::uint64_t ring_elements_sent(std::size_t count, int ranks, int rank) {
  if (ranks <= 1) return 0;
  // Reduce-scatter sends every segment but r+1, all-gather every segment but r+2.
  const auto seg = [&](int i) {
    return partition_size(count, ranks, static_cast<std::size_t>(((i % ranks) + ranks) % ranks));
  };
  return 2 * count - seg(rank + 1) - seg(rank + 2);
}

std::uint64_t ring_elements_received(std::size_t count, int ranks, int rank) {
  if (ranks <= 1) return 0;
  // Reduce-scatter receives every segment but r, all-gather every segment but r+1.
  const auto seg = [&](int i) {
    return partition_size(count, ranks, static_cast<std::size_t>(((i % ranks) + ranks) % ranks));
  };
  return 2 * count - seg(rank) - seg(rank + 1);
}

}  // namespace ringtrain
