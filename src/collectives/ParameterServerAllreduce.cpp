// Parameter-server all-reduce (see ParameterServerAllreduce.h), in chunks so that the
// server can sum chunk c while chunk c+1 arrives. The server adds the workers'
// contributions in rank order, so results are reproducible.
#include "collectives/ParameterServerAllreduce.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "collectives/Fp16Range.h"
#include "collectives/HalfConvert.h"
#include "collectives/MpiCheck.h"
#include "collectives/MpiWait.h"
#include "collectives/ReduceKernels.h"

namespace ringtrain {
namespace {

constexpr int kPushTag = 7201;
constexpr int kPullTag = 7202;

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
  const MPI_Datatype type = compressed ? MPI_UINT16_T : MPI_FLOAT;
  const std::size_t count = data.size();
  const std::size_t chunk = std::min<std::size_t>(
      std::max<std::size_t>(1, chunk_bytes / element_bytes), std::size_t{1} << 30);
  const std::size_t chunks = (count + chunk - 1) / chunk;
  const auto chunk_begin = [&](std::size_t c) { return c * chunk; };
  const auto chunk_size = [&](std::size_t c) { return std::min(chunk, count - c * chunk); };
  const int workers = size - 1;
  // 16-bit transport: the wire copy of the vector first, receive slots after it.
  std::uint16_t* wire = nullptr;
  const std::size_t slot = std::min(chunk, count);
  const std::size_t slots = rank == 0 ? 2 * slot * static_cast<std::size_t>(workers) : 0;
  if (compressed) {
    if (scratch.u16.size() < count + slots) scratch.u16.resize(count + slots);
    wire = scratch.u16.data();
  } else if (scratch.f32.size() < slots) {
    scratch.f32.resize(slots);
  }
  const auto wire_at = [&](std::size_t offset) -> void* {
    return compressed ? static_cast<void*>(wire + offset) : static_cast<void*>(data.data() + offset);
  };

  if (rank == 0) {
    // Two sets of `workers` receive buffers: chunk c+1 arrives while chunk c is summed.
    std::vector<MPI_Request> recv_requests(2 * static_cast<std::size_t>(workers), MPI_REQUEST_NULL);
    std::vector<MPI_Request> send_requests;
    send_requests.reserve(chunks * static_cast<std::size_t>(workers));
    const auto buffer = [&](std::size_t c, int w) -> void* {
      const std::size_t index =
          ((c % 2) * static_cast<std::size_t>(workers) + static_cast<std::size_t>(w)) * slot;
      return compressed ? static_cast<void*>(wire + count + index)
                        : static_cast<void*>(scratch.f32.data() + index);
    };
    const auto post = [&](std::size_t c) {
      for (int w = 0; w < workers; ++w) {
        RINGTRAIN_MPI_CHECK(MPI_Irecv(buffer(c, w), static_cast<int>(chunk_size(c)), type, w + 1,
                                      kPushTag, comm, &recv_requests[(c % 2) * workers + w]));
      }
    };
    post(0);
    for (std::size_t c = 0; c < chunks; ++c) {
      if (c + 1 < chunks) post(c + 1);
      float* dst = data.data() + chunk_begin(c);
      const std::size_t n = chunk_size(c);
      for (int w = 0; w < workers; ++w) {
        timed_wait(&recv_requests[(c % 2) * workers + w], stats, w + 1, "receive");
        stats.bytes_received += n * element_bytes;
        const bool last = w == workers - 1;
        if (compressed) {
          widen_add(compression, static_cast<const std::uint16_t*>(buffer(c, w)), dst, n);
        } else if (last && scale != 1.0f) {
          reduce_add_scale(dst, static_cast<const float*>(buffer(c, w)), n, scale);
        } else {
          reduce_add(dst, static_cast<const float*>(buffer(c, w)), n);
        }
      }
      if (compressed) {
        // Send the rounded sum and keep exactly what the workers will see.
        narrow(compression, dst, wire + chunk_begin(c), n);
        widen_scaled(compression, wire + chunk_begin(c), dst, n, scale);
      }
      for (int w = 0; w < workers; ++w) {
        MPI_Request request;
        RINGTRAIN_MPI_CHECK(MPI_Isend(wire_at(chunk_begin(c)), static_cast<int>(n), type, w + 1,
                                      kPullTag, comm, &request));
        send_requests.push_back(request);
        stats.bytes_sent += n * element_bytes;
      }
    }
    timed_waitall(static_cast<int>(send_requests.size()), send_requests.data(), stats, StallRecord::kAllRanks, "send");
  } else {
    // Push every chunk at once, then pull the results back into place; a chunk's region
    // is only overwritten after its push has completed.
    if (compressed) narrow(compression, data.data(), wire, count);
    std::vector<MPI_Request> push(chunks);
    for (std::size_t c = 0; c < chunks; ++c) {
      RINGTRAIN_MPI_CHECK(MPI_Isend(wire_at(chunk_begin(c)), static_cast<int>(chunk_size(c)), type,
                                    0, kPushTag, comm, &push[c]));
      stats.bytes_sent += chunk_size(c) * element_bytes;
    }
    std::vector<MPI_Request> pull(chunks, MPI_REQUEST_NULL);
    for (std::size_t c = 0; c < chunks; ++c) {
      timed_wait(&push[c], stats, 0, "send");
      RINGTRAIN_MPI_CHECK(MPI_Irecv(wire_at(chunk_begin(c)), static_cast<int>(chunk_size(c)), type,
                                    0, kPullTag, comm, &pull[c]));
      stats.bytes_received += chunk_size(c) * element_bytes;
    }
    timed_waitall(static_cast<int>(pull.size()), pull.data(), stats, 0, "receive");
    // fp32: the server scaled the sums before sending them.
    if (compressed) widen_scaled(compression, wire, data.data(), count, scale);
  }
}

}  // namespace ringtrain
