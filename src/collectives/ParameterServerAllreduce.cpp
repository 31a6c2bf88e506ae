// Parameter-server all-reduce (see ParameterServerAllreduce.h), in chunks so that the
// server can sum chunk c while chunk c+1 arrives. The server adds the workers'
// contributions in rank order, so results are reproducible.
#include "collectives/ParameterServerAllreduce.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "collectives/Fp16Range.h"
#include "collectives/MpiCheck.h"
#include "collectives/MpiWait.h"
#include "collectives/ReduceKernels.h"
#include "common/HalfConvert.h"

namespace ringtrain {
namespace {

constexpr int kPushTag = 7201;
constexpr int kPullTag = 7202;

// One call's shape: the vector in chunks, the transport, and where the wire lives.
struct PsCall {
  MPI_Comm comm;
  std::span<float> data;
  float scale;
  Compression compression;
  bool compressed;
  std::size_t element_bytes;
  MPI_Datatype type;
  std::size_t chunk;   // elements per chunk
  std::size_t chunks;
  std::size_t slot;    // elements per receive slot on the server
  int workers;
  std::uint16_t* wire = nullptr;  // 16-bit transport: the wire copy, then receive slots
  std::vector<float>* f32 = nullptr;

  std::size_t chunk_begin(std::size_t c) const { return c * chunk; }
  std::size_t chunk_size(std::size_t c) const { return std::min(chunk, data.size() - c * chunk); }
  void* wire_at(std::size_t offset) const {
    return compressed ? static_cast<void*>(wire + offset)
                      : static_cast<void*>(data.data() + offset);
  }
  // Server receive slot of worker w for chunk c: two sets, so chunk c+1 arrives while
  // chunk c is summed.
  void* buffer(std::size_t c, int w) const {
    const std::size_t index =
        ((c % 2) * static_cast<std::size_t>(workers) + static_cast<std::size_t>(w)) * slot;
    return compressed ? static_cast<void*>(wire + data.size() + index)
                      : static_cast<void*>(f32->data() + index);
  }
};

// Rank 0 adds the workers' chunk c in rank order into data, then sends the sum back.
void sum_chunk(const PsCall& call, std::size_t c, std::vector<MPI_Request>& recv_requests,
               std::vector<MPI_Request>& send_requests, TrafficStats& stats) {
  float* dst = call.data.data() + call.chunk_begin(c);
  const std::size_t n = call.chunk_size(c);
  for (int w = 0; w < call.workers; ++w) {
    timed_wait(&recv_requests[(c % 2) * call.workers + w], stats, w + 1, "receive");
    stats.bytes_received += n * call.element_bytes;
    const bool last = w == call.workers - 1;
    if (call.compressed) {
      widen_add(call.compression, static_cast<const std::uint16_t*>(call.buffer(c, w)), dst, n);
    } else if (last && call.scale != 1.0f) {
      reduce_add_scale(dst, static_cast<const float*>(call.buffer(c, w)), n, call.scale);
    } else {
      reduce_add(dst, static_cast<const float*>(call.buffer(c, w)), n);
    }
  }
  if (call.compressed) {
    // Send the rounded sum and keep exactly what the workers will see.
    narrow(call.compression, dst, call.wire + call.chunk_begin(c), n);
    widen_scaled(call.compression, call.wire + call.chunk_begin(c), dst, n, call.scale);
  }
  for (int w = 0; w < call.workers; ++w) {
    MPI_Request request;
    RINGTRAIN_MPI_CHECK(MPI_Isend(call.wire_at(call.chunk_begin(c)), static_cast<int>(n),
                                  call.type, w + 1, kPullTag, call.comm, &request));
    send_requests.push_back(request);
    stats.bytes_sent += n * call.element_bytes;
  }
}

void serve(const PsCall& call, TrafficStats& stats) {
  std::vector<MPI_Request> recv_requests(2 * static_cast<std::size_t>(call.workers),
                                         MPI_REQUEST_NULL);
  std::vector<MPI_Request> send_requests;
  send_requests.reserve(call.chunks * static_cast<std::size_t>(call.workers));
  const auto post = [&](std::size_t c) {
    for (int w = 0; w < call.workers; ++w) {
      RINGTRAIN_MPI_CHECK(MPI_Irecv(call.buffer(c, w), static_cast<int>(call.chunk_size(c)),
                                    call.type, w + 1, kPushTag, call.comm,
                                    &recv_requests[(c % 2) * call.workers + w]));
    }
  };
  post(0);
  for (std::size_t c = 0; c < call.chunks; ++c) {
    if (c + 1 < call.chunks) post(c + 1);
    sum_chunk(call, c, recv_requests, send_requests, stats);
  }
  timed_waitall(static_cast<int>(send_requests.size()), send_requests.data(), stats,
                StallRecord::kAllRanks, "send");
}

// Push every chunk at once, then pull the results back into place; a chunk's region is
// only overwritten after its push has completed.
void work(const PsCall& call, TrafficStats& stats) {
  const std::size_t count = call.data.size();
  if (call.compressed) narrow(call.compression, call.data.data(), call.wire, count);
  std::vector<MPI_Request> push(call.chunks);
  for (std::size_t c = 0; c < call.chunks; ++c) {
    RINGTRAIN_MPI_CHECK(MPI_Isend(call.wire_at(call.chunk_begin(c)),
                                  static_cast<int>(call.chunk_size(c)), call.type, 0, kPushTag,
                                  call.comm, &push[c]));
    stats.bytes_sent += call.chunk_size(c) * call.element_bytes;
  }
  std::vector<MPI_Request> pull(call.chunks, MPI_REQUEST_NULL);
  for (std::size_t c = 0; c < call.chunks; ++c) {
    timed_wait(&push[c], stats, 0, "send");
    RINGTRAIN_MPI_CHECK(MPI_Irecv(call.wire_at(call.chunk_begin(c)),
                                  static_cast<int>(call.chunk_size(c)), call.type, 0, kPullTag,
                                  call.comm, &pull[c]));
    stats.bytes_received += call.chunk_size(c) * call.element_bytes;
  }
  timed_waitall(static_cast<int>(pull.size()), pull.data(), stats, 0, "receive");
  // fp32: the server scaled the sums before sending them.
  if (call.compressed) widen_scaled(call.compression, call.wire, call.data.data(), count, call.scale);
}

}  // namespace

void parameter_server_allreduce(MPI_Comm comm, std::span<float> data, float scale,
                                Compression compression, std::size_t chunk_bytes,
                                AllreduceScratch& scratch, TrafficStats& stats) {
  int rank = 0;
  int size = 1;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size));
  const bool compressed = compression != Compression::kNone;
  if (compression == Compression::kFp16) scale *= fp16_prescale(comm, data, stats);
  const std::size_t element_bytes = compressed ? sizeof(std::uint16_t) : sizeof(float);
  const std::size_t count = data.size();
  const std::size_t chunk = std::min<std::size_t>(
      std::max<std::size_t>(1, chunk_bytes / element_bytes), std::size_t{1} << 30);
  PsCall call{comm,  data,  scale, compression, compressed, element_bytes,
              compressed ? MPI_UINT16_T : MPI_FLOAT,
              chunk, (count + chunk - 1) / chunk, std::min(chunk, count), size - 1};
  const std::size_t slots = rank == 0 ? 2 * call.slot * static_cast<std::size_t>(size - 1) : 0;
  if (compressed) {
    if (scratch.u16.size() < count + slots) scratch.u16.resize(count + slots);
    call.wire = scratch.u16.data();
  } else if (scratch.f32.size() < slots) {
    scratch.f32.resize(slots);
  }
  call.f32 = &scratch.f32;
  if (rank == 0) {
    serve(call, stats);
  } else {
    work(call, stats);
  }
}

}  // namespace ringtrain
