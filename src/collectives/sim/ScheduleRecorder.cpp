// ScheduleRecorder: one MpiCommunicator per virtual rank, one recorded all-reduce.
#include "collectives/sim/ScheduleRecorder.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "collectives/MpiCommunicator.h"
#include "collectives/sim/SimRuntime.h"

namespace ringtrain::sim {
namespace {

// The tuning of a call recorded `scale` times smaller: every byte threshold scaled alike.
AllreduceTuning scaled_tuning(AllreduceTuning tuning, std::size_t scale) {
  const auto down = [&](std::size_t& bytes) { bytes = std::max<std::size_t>(1, bytes / scale); };
  down(tuning.ring_chunk_bytes);
  down(tuning.ring_chunk_bytes_network);
  down(tuning.ps_chunk_bytes);
  down(tuning.rd_doubling_max_bytes);
  down(tuning.auto_ring_min_bytes_single_host);
  return tuning;
}

// The cost model of such a call: hier's network phase chooses its algorithm by the model
// for its slice, so latency and the eager limit shrink with the bytes, and every
// prediction (a per-message term plus per-byte terms) shrinks by the same factor: the
// choice at 1/scale of the size is the full-size choice.
AllreduceCostModel scaled_model(AllreduceCostModel model, std::size_t scale) {
  model.alpha_s /= static_cast<double>(scale);
  model.shm_alpha_s /= static_cast<double>(scale);
  model.eager_limit_bytes /= static_cast<double>(scale);
  return model;
}

NodeLayout layout_of(int ranks, int ranks_per_node) {
  const int nodes = (ranks + ranks_per_node - 1) / ranks_per_node;
  const int last = ranks - (nodes - 1) * ranks_per_node;
  const int several = ranks_per_node > 1 ? nodes - 1 + (last > 1 ? 1 : 0) : 0;
  return NodeLayout{ranks, nodes, several, std::min(last, ranks_per_node), std::min(ranks, ranks_per_node)};
}

// Rank r's input: small integers, so that every partial sum is exact in fp32.
float input_value(int rank, std::size_t i) { return static_cast<float>((rank % 13 + 1) * static_cast<int>(i % 7 + 1)); }

}  // namespace

std::size_t recording_scale(const RecordRequest& request) {
  std::size_t scale = 1;
  const std::size_t ranks = static_cast<std::size_t>(request.ranks);
  while (scale < kMaxScale && request.bytes / scale * ranks > request.max_recorded_bytes &&
         request.bytes / scale >= 8 * ranks * sizeof(float))
    scale *= 2;
  return scale;
}

AllreduceAlgo resolved_algo(const RecordRequest& request) {
  if (request.algo != AllreduceAlgo::kAuto) return request.algo;
  return plan_auto_allreduce(request.bytes, layout_of(request.ranks, request.ranks_per_node), request.compression,
                             request.tuning, request.model)
      .algo;
}

int resolved_rab_lanes(const RecordRequest& request) {
  if (resolved_algo(request) != AllreduceAlgo::kRabenseifner) return 1;
  return plan_rab_lanes(request.bytes, layout_of(request.ranks, request.ranks_per_node), request.compression,
                        request.tuning, request.model);
}

Recording record_allreduce(const RecordRequest& request) {
  if (request.ranks < 2) throw std::invalid_argument("simulator: --np must be >= 2");
  if (request.ranks_per_node < 1) throw std::invalid_argument("simulator: --ranks-per-node must be >= 1");
  if (request.bytes < sizeof(float)) throw std::invalid_argument("simulator: a size must be >= 4 bytes");
  if (request.algo == AllreduceAlgo::kMpi)
    throw std::invalid_argument("simulator: mpi is Open MPI's own algorithm, not code it can record");
  Recording out;
  out.algo = resolved_algo(request);
  out.rab_lanes = resolved_rab_lanes(request);
  const std::size_t scale = recording_scale(request);
  out.recorded_count = std::max<std::size_t>(1, request.bytes / sizeof(float) / scale);
  MpiCommunicatorOptions options;
  options.tuning = scaled_tuning(request.tuning, scale);
  options.cost_model = scaled_model(request.model, scale);
  options.node_group_size = request.ranks_per_node;
  std::vector<char> exact(static_cast<std::size_t>(request.ranks), 0);
  std::size_t expected_factor = 0;  // sum over ranks of (rank % 13 + 1)
  for (int r = 0; r < request.ranks; ++r) expected_factor += static_cast<std::size_t>(r % 13 + 1);
  SimRuntime runtime(request.ranks, request.ranks_per_node);
  runtime.run([&](int rank) {
    MpiCommunicator comm(MPI_COMM_WORLD, options);
    std::vector<float> data(out.recorded_count);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = input_value(rank, i);
    runtime.set_recording(true);
    comm.allreduce(data, out.algo, /*mean=*/false, request.compression);
    runtime.set_recording(false);
    bool ok = true;
    for (std::size_t i = 0; i < data.size() && ok; ++i)
      ok = data[i] == static_cast<float>(expected_factor * (i % 7 + 1));
    exact[static_cast<std::size_t>(rank)] = ok;
  });
  out.exact = std::all_of(exact.begin(), exact.end(), [](char ok) { return ok != 0; });
  out.schedule = std::move(runtime.schedule());
  out.schedule.byte_scale = static_cast<double>(scale);
  return out;
}

}  // namespace ringtrain::sim
