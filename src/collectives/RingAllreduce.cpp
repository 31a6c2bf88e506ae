// Ring all-reduce: N-1 reduce-scatter steps then N-1 all-gather steps, streamed chunk by
// chunk so that a chunk is forwarded to the right neighbour as soon as it is reduced.
//
// Segments: the buffer is split into N near-equal segments (EvenPartition.h).
// Reduce-scatter step s (0..N-2): rank r sends segment r-s and receives segment r-s-1
// (mod N), which it adds into its own copy. After step N-2, rank r owns the full sum of
// segment r+1. All-gather step t (0..N-2): rank r sends segment r+1-t and receives
// segment r-t straight into place. Per rank that is 2(N-1) segments of count/N elements,
// the 2(N-1)/N bound of Patarasuk & Yuan (2009).
//
// Pipelining: every segment is cut into chunks of tuning.ring_chunk_bytes. The receives
// of a rank form one ordered stream (reduce-scatter chunks, then all-gather chunks) which
// matches, message for message, the send stream of its left neighbour (MPI keeps the
// order of messages between a pair on one communicator and tag). Receives are posted
// `ring_recv_depth` items ahead (reduce-scatter ones into a rotating set of scratch
// chunks: double buffering), so the transfer of chunk k+1 runs while chunk k is reduced,
// and the reduced chunk is sent on (non-blocking) at once, which pipelines across steps.
#include "collectives/RingAllreduce.h"

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <vector>

#include "collectives/EvenPartition.h"
#include "collectives/MpiCheck.h"
#include "collectives/MpiWait.h"
#include "collectives/ReduceKernels.h"

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
  RingRun(MPI_Comm comm, std::span<float> data, bool mean, const AllreduceTuning& tuning,
          std::vector<float>& scratch, TrafficStats& stats)
      : comm_(comm), data_(data), mean_(mean), scratch_(scratch), stats_(stats) {
    RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
    RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size_));
    left_ = (rank_ + size_ - 1) % size_;
    right_ = (rank_ + 1) % size_;
    chunk_elems_ = std::max<std::size_t>(1, tuning.ring_chunk_bytes / sizeof(float));
    chunk_elems_ = std::min<std::size_t>(chunk_elems_, 1u << 29);  // pieces < 2^30: int counts
    depth_ = std::max(1, tuning.ring_recv_depth);
  }

  void run() {
    build_receive_stream();
    // Scratch for reduce-scatter receives: depth_ chunks (a chunk is never larger than
    // a segment, so small buffers need little scratch).
    // Segments differ by at most one element: the two sizes bound the piece length.
    slot_elems_ = std::max(piece_length(partition_size(data_.size(), size_, 0)),
                           piece_length(partition_size(data_.size(), size_, size_ - 1)));
    if (scratch_.size() < slot_elems_ * static_cast<std::size_t>(depth_)) {
      scratch_.resize(slot_elems_ * static_cast<std::size_t>(depth_));
    }
    recv_requests_.assign(static_cast<std::size_t>(depth_), MPI_REQUEST_NULL);

    // Reduce-scatter step 0: send segment r as it is.
    for_each_chunk(segment(rank_), [&](std::size_t offset, int count, std::uint64_t chunk) {
      send(offset, count, key_of(false, 0, chunk));
    });
    for (std::size_t i = 0; i < std::min<std::size_t>(depth_, recvs_.size()); ++i) post_receive(i);

    const float scale = 1.0f / static_cast<float>(size_);
    for (std::size_t i = 0; i < recvs_.size(); ++i) {
      const RingItem& item = recvs_[i];
      const std::size_t slot = i % static_cast<std::size_t>(depth_);
      timed_wait(&recv_requests_[slot], stats_, left_, "receive");
      stats_.bytes_received += static_cast<std::uint64_t>(item.count) * sizeof(float);
      float* dst = data_.data() + item.offset;
      if (!item.all_gather) {
        const float* src = scratch_.data() + slot * slot_elems_;
        if (mean_ && item.step == size_ - 2) {
          reduce_add_scale(dst, src, static_cast<std::size_t>(item.count), scale);
        } else {
          reduce_add(dst, src, static_cast<std::size_t>(item.count));
        }
      }
      // The slot is free again: keep `depth_` receives in flight.
      if (i + depth_ < recvs_.size()) post_receive(i + depth_);
      // Forward: reduce-scatter step s feeds step s+1; the last one starts the
      // all-gather; all-gather step t feeds step t+1.
      const std::uint64_t chunk = item.key % kChunkRadix;
      if (!item.all_gather) {
        const bool last = item.step == size_ - 2;
        send(item.offset, item.count, key_of(last, last ? 0 : item.step + 1, chunk));
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
  // chunks ran 10-50% slower than the same segment whole or cut into four or more.
  std::size_t piece_length(std::size_t n) const { return n <= 2 * chunk_elems_ ? n : chunk_elems_; }

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
      for_each_chunk(segment(rank_ - s - 1), [&](std::size_t offset, int count, std::uint64_t c) {
        recvs_.push_back({false, s, offset, count, key_of(false, s, c)});
      });
    }
    for (int t = 0; t + 1 < size_; ++t) {
      for_each_chunk(segment(rank_ - t), [&](std::size_t offset, int count, std::uint64_t c) {
        recvs_.push_back({true, t, offset, count, key_of(true, t, c)});
      });
    }
  }

  void post_receive(std::size_t i) {
    const RingItem& item = recvs_[i];
    const std::size_t slot = i % static_cast<std::size_t>(depth_);
    float* dst;
    if (item.all_gather) {
      // Receiving in place overwrites segment r-t, which this rank sent in reduce-scatter
      // step t: that send must be complete before the buffer may change.
      complete_sends_up_to(key_of(false, item.step, item.key % kChunkRadix));
      dst = data_.data() + item.offset;
    } else {
      dst = scratch_.data() + slot * slot_elems_;
    }
    RINGTRAIN_MPI_CHECK(
        MPI_Irecv(dst, item.count, MPI_FLOAT, left_, kRingTag, comm_, &recv_requests_[slot]));
  }

  void send(std::size_t offset, int count, std::uint64_t key) {
    MPI_Request request;
    RINGTRAIN_MPI_CHECK(
        MPI_Isend(data_.data() + offset, count, MPI_FLOAT, right_, kRingTag, comm_, &request));
    stats_.bytes_sent += static_cast<std::uint64_t>(count) * sizeof(float);
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
  bool mean_;
  std::vector<float>& scratch_;  // owned by the caller, reused across calls
  TrafficStats& stats_;
  int rank_ = 0;
  int size_ = 1;
  int left_ = 0;
  int right_ = 0;
  std::size_t chunk_elems_ = 1;
  std::size_t slot_elems_ = 1;
  int depth_ = 2;
  std::vector<RingItem> recvs_;
  std::vector<MPI_Request> recv_requests_;
  std::deque<PendingSend> sends_;
};

}  // namespace

void ring_allreduce(MPI_Comm comm, std::span<float> data, bool mean, const AllreduceTuning& tuning,
                    std::vector<float>& scratch, TrafficStats& stats) {
  int size = 1;
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size));
  // One rank or nothing to reduce: the sum and the mean are the data itself.
  if (size == 1 || data.empty()) return;
  RingRun(comm, data, mean, tuning, scratch, stats).run();
}

std::uint64_t ring_bytes_sent(std::size_t count, int ranks, int rank) {
  if (ranks <= 1) return 0;
  // Reduce-scatter sends every segment but r+1, all-gather every segment but r+2.
  const auto seg = [&](int i) {
    return partition_size(count, ranks, static_cast<std::size_t>(((i % ranks) + ranks) % ranks));
  };
  return (2 * count - seg(rank + 1) - seg(rank + 2)) * sizeof(float);
}

std::uint64_t ring_bytes_received(std::size_t count, int ranks, int rank) {
  if (ranks <= 1) return 0;
  // Reduce-scatter receives every segment but r, all-gather every segment but r+1.
  const auto seg = [&](int i) {
    return partition_size(count, ranks, static_cast<std::size_t>(((i % ranks) + ranks) % ranks));
  };
  return (2 * count - seg(rank) - seg(rank + 1)) * sizeof(float);
}

}  // namespace ringtrain
