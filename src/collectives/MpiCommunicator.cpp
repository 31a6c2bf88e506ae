// MpiCommunicator: the node split, the all-reduce dispatch and the small collectives on MPI.
//
// Byte counters: the hand-written algorithms count exactly what they pass to point-to-point
// calls. For work delegated to MPI's own collectives (MPI_Allreduce, MPI_Bcast,
// MPI_Allgather[v]) the internal traffic is not observable, so they count the payload at
// the interface: allreduce sends and receives the vector once (N > 1), broadcast's root
// sends it and the others receive it, allgather sends this rank's value and receives the
// others'. Barrier moves no payload, nor do hier's copies through shared memory.
#include "collectives/MpiCommunicator.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "collectives/HalvingDoublingAllreduce.h"
#include "collectives/MpiCheck.h"
#include "collectives/ParameterServerAllreduce.h"
#include "collectives/RabenseifnerAllreduce.h"
#include "collectives/ReduceKernels.h"
#include "collectives/RingAllreduce.h"
#include "collectives/StallRecord.h"

namespace ringtrain {
namespace {

// Largest element count passed to one MPI call (MPI counts are int).
constexpr std::size_t kMaxCount = static_cast<std::size_t>(INT_MAX);

// The stall watchdog's name of an all-reduce (static text).
const char* stall_operation(AllreduceAlgo algo) {
  switch (algo) {
    case AllreduceAlgo::kRing: return "ring all-reduce";
    case AllreduceAlgo::kRecursiveDoubling: return "rd all-reduce";
    case AllreduceAlgo::kRabenseifner: return "rab all-reduce";
    case AllreduceAlgo::kParameterServer: return "ps all-reduce";
    case AllreduceAlgo::kMpi: return "mpi all-reduce";
    case AllreduceAlgo::kHierarchical: return "hier all-reduce";
    case AllreduceAlgo::kAuto: break;
  }
  return "all-reduce";
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm parent, const MpiCommunicatorOptions& options)
    : tuning_(options.tuning), cost_model_(options.cost_model) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) throw std::runtime_error("MpiCommunicator: MPI is not initialised");
  if (options.node_group_size < 0)
    throw std::invalid_argument("MpiCommunicator: node_group_size must be >= 0");
  RINGTRAIN_MPI_CHECK(MPI_Comm_dup(parent, &comm_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  if (options.round_robin_nodes < 0)
    throw std::invalid_argument("MpiCommunicator: round_robin_nodes must be >= 0");
  split_nodes(options);
  hier_ = std::make_unique<HierarchicalAllreduce>(node_comm_, cross_comm_,
                                                  layout_.min_ranks_per_node);
}

// Nodes are ranks that share memory (never host names, which emulated nodes share). The
// leaders (node rank 0) number the nodes in the order of their lowest rank; the ring order
// sorts ranks by that number, keeping rank order within a node. The ring and rab take the
// order as a permutation of comm_ (not a reordered communicator), so the ranks they report
// to the stall watchdog are comm_'s. hier's cross communicators join local rank l of every
// node, for l below the smallest node's rank count, in node order.
void MpiCommunicator::split_nodes(const MpiCommunicatorOptions& options) {
  if (options.round_robin_nodes > 0) {
    RINGTRAIN_MPI_CHECK(MPI_Comm_split(comm_, rank_ % options.round_robin_nodes, rank_, &node_comm_));
  } else if (options.node_group_size > 0) {
    RINGTRAIN_MPI_CHECK(MPI_Comm_split(comm_, rank_ / options.node_group_size, rank_, &node_comm_));
  } else {
    RINGTRAIN_MPI_CHECK(
        MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_comm_));
  }
  RINGTRAIN_MPI_CHECK(MPI_Comm_set_errhandler(node_comm_, MPI_ERRORS_RETURN));
  int node_rank = 0;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(node_comm_, &node_rank));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(node_comm_, &node_size_));
  const bool leader = node_rank == 0;
  MPI_Comm leaders = MPI_COMM_NULL;
  RINGTRAIN_MPI_CHECK(MPI_Comm_split(comm_, leader ? 0 : MPI_UNDEFINED, rank_, &leaders));
  int node_index = 0;
  if (leaders != MPI_COMM_NULL) {
    RINGTRAIN_MPI_CHECK(MPI_Comm_rank(leaders, &node_index));
    RINGTRAIN_MPI_CHECK(MPI_Comm_free(&leaders));
  }
  RINGTRAIN_MPI_CHECK(MPI_Bcast(&node_index, 1, MPI_INT, 0, node_comm_));
  std::vector<int> node_of(static_cast<std::size_t>(size_));
  RINGTRAIN_MPI_CHECK(MPI_Allgather(&node_index, 1, MPI_INT, node_of.data(), 1, MPI_INT, comm_));
  ring_order_.resize(static_cast<std::size_t>(size_));
  std::iota(ring_order_.begin(), ring_order_.end(), 0);
  std::stable_sort(ring_order_.begin(), ring_order_.end(),
                   [&](int a, int b) { return node_of[a] < node_of[b]; });
  // Nodes, nodes with several ranks, and the smallest and largest node (max of -size).
  int counts[4] = {leader ? 1 : 0, leader && node_size_ > 1 ? 1 : 0, -node_size_, node_size_};
  RINGTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT, MPI_SUM, comm_));
  RINGTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, counts + 2, 2, MPI_INT, MPI_MAX, comm_));
  layout_ = NodeLayout{size_, counts[0], counts[1], -counts[2], counts[3]};
  const int slices = layout_.min_ranks_per_node;
  RINGTRAIN_MPI_CHECK(
      MPI_Comm_split(comm_, node_rank < slices ? node_rank : MPI_UNDEFINED, node_index, &cross_comm_));
  if (cross_comm_ != MPI_COMM_NULL)
    RINGTRAIN_MPI_CHECK(MPI_Comm_set_errhandler(cross_comm_, MPI_ERRORS_RETURN));
  // Every node's leader is its first rank in ring order.
  node_place_ = NodePlace{node_index, counts[0], std::vector<int>(static_cast<std::size_t>(counts[0]), -1)};
  for (const int r : ring_order_) {
    int& first = node_place_.leaders[static_cast<std::size_t>(node_of[static_cast<std::size_t>(r)])];
    if (first < 0) first = r;
  }
}

MpiCommunicator::~MpiCommunicator() {
  hier_.reset();  // frees its shared window before the communicators go
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (cross_comm_ != MPI_COMM_NULL) MPI_Comm_free(&cross_comm_);
  if (node_comm_ != MPI_COMM_NULL) MPI_Comm_free(&node_comm_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

RingOptions MpiCommunicator::ring_options(bool network, std::span<const int> order) const {
  return RingOptions{network ? tuning_.ring_chunk_bytes_network : tuning_.ring_chunk_bytes,
                     tuning_.ring_recv_depth, /*chunk_is_limit=*/network, order};
}

AllreduceAlgo MpiCommunicator::resolve(AllreduceAlgo algo, std::size_t bytes,
                                       Compression compression) const {
  return plan_allreduce(algo, bytes, compression).algo;
}

AllreducePlan MpiCommunicator::plan_allreduce(AllreduceAlgo algo, std::size_t bytes,
                                              Compression compression) const {
  AllreducePlan plan;
  if (algo == AllreduceAlgo::kAuto) {
    plan = plan_auto_allreduce(bytes, layout_, compression, tuning_, cost_model_);
  } else {
    plan.algo = algo;
    plan.basis = "forced";
    // The prediction of the forced algorithm, where the model applies (several nodes).
    const bool modelled = algo == AllreduceAlgo::kRing || algo == AllreduceAlgo::kRabenseifner ||
                          (algo == AllreduceAlgo::kRecursiveDoubling && compression == Compression::kNone);
    if (modelled && layout_.nodes > 1) {
      const ModelLayout where = model_layout(layout_, tuning_);
      if (algo == AllreduceAlgo::kRabenseifner) {
        // rab's lanes as auto would run it (across nodes the model's choice).
        // Forced lanes with several ranks per node have no prediction.
        plan.rab_lanes = plan_rab_lanes(bytes, layout_, compression, tuning_, cost_model_);
        if (rab_lanes_modelled(where, plan.rab_lanes))
          plan.predicted_s.emplace_back(
              algo, predict_rab_seconds(bytes, size_, compression, cost_model_, where, plan.rab_lanes));
      } else {
        plan.predicted_s.emplace_back(algo, predict_allreduce_seconds(algo, bytes, size_, compression,
                                                                      tuning_.rd_doubling_max_bytes, cost_model_,
                                                                      where));
      }
    }
    force_rab_lanes(plan, bytes, layout_, compression, tuning_, cost_model_);
    if (algo == AllreduceAlgo::kHierarchical && layout_.nodes > 1 && layout_.nodes_with_several_ranks > 0) {
      plan.predicted_s.emplace_back(
          algo, predict_hier_seconds(bytes, layout_.nodes, layout_.min_ranks_per_node,
                                     layout_.max_ranks_per_node, compression,
                                     tuning_.rd_doubling_max_bytes, cost_model_,
                                     tuning_.ring_chunk_bytes_network));
    }
  }
  // With one rank per node the hierarchy is the flat ring.
  if (plan.algo == AllreduceAlgo::kHierarchical && layout_.nodes_with_several_ranks == 0)
    plan.algo = AllreduceAlgo::kRing;
  return plan;
}

void MpiCommunicator::across_nodes(std::span<float> data, float scale, Compression compression) {
  // One collective over the whole slice, chosen by the model for this slice on links that
  // the node's S owners share (the same choice on every member: same slice size).
  const AllreducePlan plan =
      plan_hier_network(data.size_bytes(), layout_.nodes, layout_.min_ranks_per_node, compression,
                        tuning_.rd_doubling_max_bytes, cost_model_, tuning_.ring_chunk_bytes_network);
  switch (plan.algo) {
    case AllreduceAlgo::kRecursiveDoubling:
      halving_doubling_allreduce(cross_comm_, data, scale, tuning_.rd_doubling_max_bytes, scratch_,
                                 stats_);
      return;
    case AllreduceAlgo::kRabenseifner:
      // The model's lanes: one when S slices share the link (lanes are modelled for one
      // collective per link), not forced (tuning.rab_lanes is for the flat rab).
      rabenseifner_allreduce(cross_comm_, data, scale, compression, ring_options(true).chunk_bytes,
                             tuning_.rab_send_window, {}, plan.rab_lanes, scratch_, stats_);
      return;
    default:
      ring_allreduce(cross_comm_, data, scale, compression, ring_options(true), scratch_, stats_);
  }
}

void MpiCommunicator::allreduce_scaled(std::span<float> data, AllreduceAlgo algo, float scale,
                                       Compression compression) {
  const AllreducePlan plan = plan_allreduce(algo, data.size_bytes(), compression);
  algo = plan.algo;
  StallRecord::instance().set_operation(stall_operation(algo));
  if (compression != Compression::kNone &&
      (algo == AllreduceAlgo::kMpi || algo == AllreduceAlgo::kRecursiveDoubling)) {
    throw std::invalid_argument("all-reduce '" + std::string(allreduce_algo_name(algo)) +
                                "' moves fp32 only; --compress " +
                                std::string(compression_name(compression)) +
                                " works with ring, hier, ps, rab or auto");
  }
  switch (algo) {
    case AllreduceAlgo::kRing:
      ring_allreduce(comm_, data, scale, compression, ring_options(!single_host(), ring_order_),
                     scratch_, stats_);
      return;
    case AllreduceAlgo::kHierarchical:
      hier_->run(
          data, scale, compression,
          [this](std::span<float> d, float s, Compression c) { across_nodes(d, s, c); }, stats_);
      return;
    case AllreduceAlgo::kRecursiveDoubling:
      halving_doubling_allreduce(comm_, data, scale, tuning_.rd_doubling_max_bytes, scratch_,
                                 stats_);
      return;
    case AllreduceAlgo::kRabenseifner:
      rabenseifner_allreduce(comm_, data, scale, compression,
                             ring_options(!single_host()).chunk_bytes, tuning_.rab_send_window,
                             ring_order_, plan.rab_lanes, scratch_, stats_);
      return;
    case AllreduceAlgo::kParameterServer:
      parameter_server_allreduce(comm_, data, scale, compression, tuning_.ps_chunk_bytes, scratch_,
                                 stats_);
      return;
    case AllreduceAlgo::kMpi: {
      // MPI's reduction runs inside the call, so all of it is counted as waiting.
      const auto start = std::chrono::steady_clock::now();
      for (std::size_t offset = 0; offset < data.size(); offset += kMaxCount) {
        const std::size_t n = std::min(kMaxCount, data.size() - offset);
        const StallWaitScope wait("MPI_Allreduce", StallRecord::kAllRanks);
        RINGTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data.data() + offset, static_cast<int>(n),
                                          MPI_FLOAT, MPI_SUM, comm_));
      }
      stats_.wait_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      stats_.bytes_sent += data.size_bytes();
      stats_.bytes_received += data.size_bytes();
      if (scale != 1.0f) scale_in_place(data.data(), data.size(), scale);
      return;
    }
    case AllreduceAlgo::kAuto:
      break;
  }
  throw std::invalid_argument("MpiCommunicator::allreduce: invalid algorithm");
}

void MpiCommunicator::reduce_doubles(std::span<double> data, MPI_Op op) {
  StallRecord::instance().set_operation("all-reduce of metrics");
  for (std::size_t offset = 0; offset < data.size(); offset += kMaxCount) {
    const std::size_t n = std::min(kMaxCount, data.size() - offset);
    const StallWaitScope wait("MPI_Allreduce", StallRecord::kAllRanks);
    RINGTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data.data() + offset, static_cast<int>(n),
                                      MPI_DOUBLE, op, comm_));
  }
  if (size_ > 1) {
    stats_.bytes_sent += data.size_bytes();
    stats_.bytes_received += data.size_bytes();
  }
}

void MpiCommunicator::allreduce_sum(std::span<double> data) { reduce_doubles(data, MPI_SUM); }

void MpiCommunicator::allreduce_max(std::span<double> data) { reduce_doubles(data, MPI_MAX); }

void MpiCommunicator::allreduce_sum(std::span<std::int64_t> data) {
  StallRecord::instance().set_operation("exact all-reduce (int64)");
  // On one host, in calls of 8 MiB: Open MPI 4.1's MPI_Allreduce falls off a cliff between 16
  // and 37 MB there (np 2, allreduce_bench --algo mpi: 0.35 GB/s at 16 MB, 0.08-0.1 GB/s at 37
  // and 74 MB, where the ring keeps 0.6-1.0 GB/s), with every --mca
  // coll_tuned_allreduce_algorithm; likely its temporary buffer, which past glibc's 32 MiB mmap
  // threshold is fresh pages on every call. vgg11's 74 MB int64 sum, best of 4-6 on a loaded
  // host: 0.9-1.1 s whole, 0.25-0.3 s in 8 MiB calls (75-300 ms in 1-16 MiB ones). Across 2
  // emulated 1 Gbit/s nodes the link dominates and the cut showed no gain (1.2 s against
  // 1.0 s whole, best of 2), so there the vector goes whole as before. An integer sum has the
  // same bits however it is cut.
  constexpr std::size_t kHostChunk = (std::size_t{8} << 20) / sizeof(std::int64_t);
  const std::size_t chunk = single_host() ? kHostChunk : kMaxCount;
  for (std::size_t offset = 0; offset < data.size(); offset += chunk) {
    const std::size_t n = std::min(chunk, data.size() - offset);
    const StallWaitScope wait("MPI_Allreduce", StallRecord::kAllRanks);
    RINGTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data.data() + offset, static_cast<int>(n), MPI_INT64_T, MPI_SUM,
                                      comm_));
  }
  if (size_ > 1) {
    stats_.bytes_sent += data.size_bytes();
    stats_.bytes_received += data.size_bytes();
  }
}

void MpiCommunicator::broadcast(std::span<std::byte> data, int root) {
  if (root < 0 || root >= size_) {
    throw std::invalid_argument("broadcast: root " + std::to_string(root) + " outside [0, " +
                                std::to_string(size_) + ")");
  }
  for (std::size_t offset = 0; offset < data.size(); offset += kMaxCount) {
    const std::size_t n = std::min(kMaxCount, data.size() - offset);
    StallRecord::instance().set_operation("broadcast");
    const StallWaitScope wait("MPI_Bcast", root);
    RINGTRAIN_MPI_CHECK(
        MPI_Bcast(data.data() + offset, static_cast<int>(n), MPI_BYTE, root, comm_));
  }
  if (size_ > 1) {
    if (rank_ == root) {
      stats_.bytes_sent += data.size();
    } else {
      stats_.bytes_received += data.size();
    }
  }
}

std::vector<std::uint64_t> MpiCommunicator::allgather(std::uint64_t value) {
  std::vector<std::uint64_t> values(static_cast<std::size_t>(size_));
  StallRecord::instance().set_operation("all-gather");
  const StallWaitScope wait("MPI_Allgather", StallRecord::kAllRanks);
  RINGTRAIN_MPI_CHECK(
      MPI_Allgather(&value, 1, MPI_UINT64_T, values.data(), 1, MPI_UINT64_T, comm_));
  if (size_ > 1) {
    stats_.bytes_sent += sizeof(value);
    stats_.bytes_received += sizeof(value) * static_cast<std::uint64_t>(size_ - 1);
  }
  return values;
}

std::vector<std::string> MpiCommunicator::allgather(const std::string& value) {
  if (value.size() > kMaxCount)
    throw std::invalid_argument("allgather: string longer than INT_MAX");
  const int length = static_cast<int>(value.size());
  std::vector<int> lengths(static_cast<std::size_t>(size_));
  StallRecord::instance().set_operation("all-gather");
  const StallWaitScope wait("MPI_Allgather", StallRecord::kAllRanks);
  RINGTRAIN_MPI_CHECK(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm_));
  std::vector<int> displs(static_cast<std::size_t>(size_));
  std::size_t total = 0;
  for (int r = 0; r < size_; ++r) {
    if (total > kMaxCount)
      throw std::invalid_argument("allgather: strings longer than INT_MAX in total");
    displs[r] = static_cast<int>(total);
    total += static_cast<std::size_t>(lengths[r]);
  }
  std::string joined(total, '\0');
  RINGTRAIN_MPI_CHECK(MPI_Allgatherv(value.data(), length, MPI_CHAR, joined.data(), lengths.data(),
                                     displs.data(), MPI_CHAR, comm_));
  std::vector<std::string> values;
  values.reserve(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    values.push_back(
        joined.substr(static_cast<std::size_t>(displs[r]), static_cast<std::size_t>(lengths[r])));
  }
  if (size_ > 1) {
    stats_.bytes_sent += value.size();
    stats_.bytes_received += total - value.size();
  }
  return values;
}

void MpiCommunicator::barrier() {
  StallRecord::instance().set_operation("barrier");
  const StallWaitScope wait("MPI_Barrier", StallRecord::kAllRanks);
  RINGTRAIN_MPI_CHECK(MPI_Barrier(comm_));
}

std::string MpiCommunicator::host_name() const {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  RINGTRAIN_MPI_CHECK(MPI_Get_processor_name(name, &length));
  return std::string(name, static_cast<std::size_t>(length));
}

std::string MpiCommunicator::library_version() const {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  RINGTRAIN_MPI_CHECK(MPI_Get_library_version(text, &length));
  std::string version(text, static_cast<std::size_t>(length));
  const auto end = version.find_first_of("\r\n,");
  if (end != std::string::npos) version.resize(end);
  while (!version.empty() && (version.back() == ' ' || version.back() == '\0')) version.pop_back();
  return version;
}

bool MpiCommunicator::allows_serialized_threads() const {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  return level >= MPI_THREAD_SERIALIZED;
}

}  // namespace ringtrain
