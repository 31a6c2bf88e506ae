// Communicator over an MPI communicator: owns an MPI_Comm_dup with MPI_ERRORS_RETURN, so
// every failing MPI call becomes a std::runtime_error (MpiCheck.h) instead of an abort.
// It also owns the node split hier and auto need (MPI_COMM_TYPE_SHARED) and the tuning
// of the hand-written algorithms, fixed at construction.
#pragma once

#include "collectives/Mpi.h"

#include <memory>
#include <vector>

#include "collectives/AllreduceCostModel.h"
#include "collectives/AllreduceScratch.h"
#include "collectives/AllreduceTuning.h"
#include "collectives/Communicator.h"
#include "collectives/HierarchicalAllreduce.h"
#include "collectives/RingAllreduce.h"
#include "collectives/TrafficStats.h"

namespace ringtrain {

struct MpiCommunicatorOptions {
  // Chunk sizes and `auto` thresholds (allreduce_bench exposes them for experiments).
  AllreduceTuning tuning;
  // What `auto` chooses by across nodes (set_cost_model() replaces it).
  AllreduceCostModel cost_model;
  // 0: nodes are the groups of ranks that share memory (MPI_COMM_TYPE_SHARED). k > 0:
  // ranks r with the same r / k form a node, so tests can exercise hier with one and two
  // ranks per "node" on one host; every such group must share memory.
  int node_group_size = 0;
  // k > 0: rank r is on "node" r % k instead (round-robin placement, as `mpirun --map-by
  // node` gives), so tests can check that the flat ring and rab order ranks by node
  // whatever the numbering. Overrides node_group_size.
  int round_robin_nodes = 0;
};

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates `parent` (collective over it). MPI must be initialised.
  explicit MpiCommunicator(MPI_Comm parent, const MpiCommunicatorOptions& options = {});
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  using Communicator::allreduce;
  void allreduce_sum(std::span<double> data) override;
  void allreduce_max(std::span<double> data) override;
  void allreduce_sum(std::span<std::int64_t> data) override;
  void broadcast(std::span<std::byte> data, int root) override;
  using Communicator::broadcast;
  std::vector<std::uint64_t> allgather(std::uint64_t value) override;
  std::vector<std::string> allgather(const std::string& value) override;
  void barrier() override;

  std::uint64_t bytes_sent() const override { return stats_.bytes_sent; }
  std::uint64_t bytes_received() const override { return stats_.bytes_received; }
  double wait_seconds() const override { return stats_.wait_seconds; }
  // MPI_Query_thread: what MPI_Init_thread granted.
  bool allows_serialized_threads() const override;

  std::string host_name() const override;
  int ranks_on_node() const override { return node_size_; }
  NodePlace node_place() const override { return node_place_; }
  std::string library_version() const override;

  const AllreduceTuning& allreduce_tuning() const { return tuning_; }
  // The ranks of comm() in the order of the flat ring and rab: node by node (nodes in the
  // order of their lowest rank, ranks of a node in rank order), so the ring crosses each
  // node boundary once and rab's first, largest exchanges stay inside a node.
  const std::vector<int>& ring_order() const { return ring_order_; }
  const NodeLayout& layout() const { return layout_; }
  MPI_Comm comm() const { return comm_; }
  // True when every rank shares this rank's node.
  bool single_host() const { return layout_.nodes == 1; }
  // The algorithm `algo` runs as for a vector of `bytes` bytes (resolves auto).
  AllreduceAlgo resolve(AllreduceAlgo algo, std::size_t bytes, Compression compression) const;
  // resolve() with the reason and the cost model's predictions (plan_auto_allreduce for
  // auto; for another algorithm the prediction of it when the model covers it).
  AllreducePlan plan_allreduce(AllreduceAlgo algo, std::size_t bytes,
                               Compression compression) const override;
  void set_cost_model(const AllreduceCostModel& model) override { cost_model_ = model; }
  const AllreduceCostModel& cost_model() const { return cost_model_; }

 protected:
  void allreduce_scaled(std::span<float> data, AllreduceAlgo algo, float scale,
                        Compression compression) override;

 private:
  void reduce_doubles(std::span<double> data, MPI_Op op);
  void split_nodes(const MpiCommunicatorOptions& options);
  // hier's network phase over cross_comm_: one slice, by ring, rd or rab
  // (plan_hier_network).
  void across_nodes(std::span<float> data, float scale, Compression compression);
  // order: the ring order over the communicator the ring runs on (empty: rank order).
  RingOptions ring_options(bool network, std::span<const int> order = {}) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm node_comm_ = MPI_COMM_NULL;
  // hier: local rank l of every node, in node order (l < the smallest node's rank count;
  // MPI_COMM_NULL on the other ranks).
  MPI_Comm cross_comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int node_size_ = 1;  // ranks in node_comm_
  NodeLayout layout_;
  NodePlace node_place_;
  AllreduceTuning tuning_;
  AllreduceCostModel cost_model_;
  std::vector<int> ring_order_;  // comm_ ranks node by node (ring_order())
  TrafficStats stats_;
  AllreduceScratch scratch_;  // receive space of the hand-written algorithms
  std::unique_ptr<HierarchicalAllreduce> hier_;
};

}  // namespace ringtrain
