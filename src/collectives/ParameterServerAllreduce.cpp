// Parameter-server all-reduce (see ParameterServerAllreduce.h), in chunks of
// tuning.ps_chunk_bytes so that the server can sum chunk c while chunk c+1 arrives.
// The server adds the workers' contributions in rank order, so results are reproducible.
#include "collectives/ParameterServerAllreduce.h"

#include <algorithm>
#include <cstdint>

#include "collectives/MpiCheck.h"
#include "collectives/MpiWait.h"
#include "collectives/ReduceKernels.h"

namespace ringtrain {
namespace {

constexpr int kPushTag = 7201;
constexpr int kPullTag = 7202;

}  // namespace

void parameter_server_allreduce(MPI_Comm comm, std::span<float> data, bool mean,
                                const AllreduceTuning& tuning, std::vector<float>& scratch,
                                TrafficStats& stats) {
  int rank = 0;
  int size = 1;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size));
  const std::size_t count = data.size();
  const float scale = 1.0f / static_cast<float>(size);
  // One rank or nothing to reduce: the sum and the mean are the data itself.
  if (size == 1 || count == 0) return;
  const std::size_t chunk = std::min<std::size_t>(
      std::max<std::size_t>(1, tuning.ps_chunk_bytes / sizeof(float)), std::size_t{1} << 30);
  const std::size_t chunks = (count + chunk - 1) / chunk;
  const auto chunk_begin = [&](std::size_t c) { return c * chunk; };
  const auto chunk_size = [&](std::size_t c) { return std::min(chunk, count - c * chunk); };
  const int workers = size - 1;

  if (rank == 0) {
    // Two sets of `workers` receive buffers: chunk c+1 arrives while chunk c is summed.
    const std::size_t slot = std::min(chunk, count);
    const std::size_t need = 2 * slot * static_cast<std::size_t>(workers);
    if (scratch.size() < need) scratch.resize(need);
    std::vector<MPI_Request> recv_requests(2 * static_cast<std::size_t>(workers), MPI_REQUEST_NULL);
    std::vector<MPI_Request> send_requests;
    send_requests.reserve(chunks * static_cast<std::size_t>(workers));
    const auto buffer = [&](std::size_t c, int w) {
      return scratch.data() +
             ((c % 2) * static_cast<std::size_t>(workers) + static_cast<std::size_t>(w)) * slot;
    };
    const auto post = [&](std::size_t c) {
      for (int w = 0; w < workers; ++w) {
        RINGTRAIN_MPI_CHECK(MPI_Irecv(buffer(c, w), static_cast<int>(chunk_size(c)), MPI_FLOAT,
                                      w + 1, kPushTag, comm,
                                      &recv_requests[(c % 2) * workers + w]));
      }
    };
    post(0);
    for (std::size_t c = 0; c < chunks; ++c) {
      if (c + 1 < chunks) post(c + 1);
      float* dst = data.data() + chunk_begin(c);
      const std::size_t n = chunk_size(c);
      for (int w = 0; w < workers; ++w) {
        timed_wait(&recv_requests[(c % 2) * workers + w], stats, w + 1, "receive");
        stats.bytes_received += n * sizeof(float);
        if (mean && w == workers - 1) {
          reduce_add_scale(dst, buffer(c, w), n, scale);
        } else {
          reduce_add(dst, buffer(c, w), n);
        }
      }
      for (int w = 0; w < workers; ++w) {
        MPI_Request request;
        RINGTRAIN_MPI_CHECK(
            MPI_Isend(dst, static_cast<int>(n), MPI_FLOAT, w + 1, kPullTag, comm, &request));
        send_requests.push_back(request);
        stats.bytes_sent += n * sizeof(float);
      }
    }
    timed_waitall(static_cast<int>(send_requests.size()), send_requests.data(), stats, StallRecord::kAllRanks, "send");
  } else {
    // Push every chunk at once, then pull the results back into place; a chunk's region
    // is only overwritten after its push has completed.
    std::vector<MPI_Request> push(chunks);
    for (std::size_t c = 0; c < chunks; ++c) {
      RINGTRAIN_MPI_CHECK(MPI_Isend(data.data() + chunk_begin(c), static_cast<int>(chunk_size(c)),
                                    MPI_FLOAT, 0, kPushTag, comm, &push[c]));
      stats.bytes_sent += chunk_size(c) * sizeof(float);
    }
    std::vector<MPI_Request> pull(chunks, MPI_REQUEST_NULL);
    for (std::size_t c = 0; c < chunks; ++c) {
      timed_wait(&push[c], stats, 0, "send");
      RINGTRAIN_MPI_CHECK(MPI_Irecv(data.data() + chunk_begin(c), static_cast<int>(chunk_size(c)),
                                    MPI_FLOAT, 0, kPullTag, comm, &pull[c]));
      stats.bytes_received += chunk_size(c) * sizeof(float);
    }
    timed_waitall(static_cast<int>(pull.size()), pull.data(), stats, 0, "receive");
  }
}

}  // namespace ringtrain
