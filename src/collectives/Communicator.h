// The collective operations the trainer needs, behind one interface: MpiCommunicator for
// real runs, SelfCommunicator (one rank) so serial code and tests need no MPI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/Compression.h"

namespace ringtrain {

enum class AllreduceAlgo {
  kRing,               // reduce-scatter + all-gather over point-to-point (2(N-1)/N per rank)
  kHierarchical,       // reduce-scatter in each node (shared memory), one all-reduce per slice across nodes, gather
  kMpi,                // MPI_Allreduce as Open MPI implements it
  kParameterServer,    // everyone -> rank 0, sum, rank 0 -> everyone
  kRecursiveDoubling,  // recursive doubling, or halving / doubling unpipelined ("rd")
  kRabenseifner,       // recursive halving / doubling pipelined in chunks, 16-bit too ("rab")
  kAuto,               // chosen per vector by a cost model (AllreduceCostModel.h) and the node layout
};

// "ring" | "hier" | "mpi" | "ps" | "rd" | "rab" | "auto"; throws std::invalid_argument otherwise.
AllreduceAlgo parse_allreduce_algo(std::string_view name);
std::string_view allreduce_algo_name(AllreduceAlgo algo);

struct AllreduceCostModel;  // AllreduceCostModel.h

// Where a rank sits among the nodes (MPI's locality, MPI_COMM_TYPE_SHARED, never host
// names): its node's number, the node count, and every node's leader (its lowest rank),
// indexed by node. Nodes are numbered in the order of their lowest rank.
struct NodePlace {
  int node = 0;
  int nodes = 1;
  std::vector<int> leaders{0};
  int leader_of(int k) const { return leaders[static_cast<std::size_t>(k)]; }
};

// What an all-reduce of a given size runs as, and why: the algorithm, how it was chosen
// (basis), and the cost model's predicted seconds of each algorithm it weighed (empty when
// no prediction was made).
struct AllreducePlan {
  AllreduceAlgo algo = AllreduceAlgo::kRing;
  // "cost model", "forced" (an algorithm other than auto was asked for), or the rule auto
  // followed where the model does not apply ("one rank", "one host, measured crossover, not
  // modelled").
  std::string basis;
  std::vector<std::pair<AllreduceAlgo, double>> predicted_s;
  // rab's lanes (RabenseifnerAllreduce.h) when algo is rab, and the lanes rab's prediction
  // in predicted_s is for; 1 otherwise.
  int rab_lanes = 1;
};

// What a plan runs, as the start line, summary.json's plans, allreduce_bench and the
// simulator's tables name it: the algorithm, and "rab xK" for rab in K > 1 lanes.
std::string allreduce_plan_label(const AllreducePlan& plan);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place: data <- sum over ranks, then * (1 / size()) if mean. Every rank passes the
  // same data.size(), algorithm and compression, and every rank ends with bit-identical
  // values. Throws std::invalid_argument for an invalid algo/compression value.
  void allreduce(std::span<float> data, AllreduceAlgo algo, bool mean) {
    allreduce(data, algo, mean, Compression::kNone);
  }
  void allreduce(std::span<float> data, AllreduceAlgo algo, bool mean, Compression compression);

  // Small exact sums (metrics), in place, with MPI's own reduction.
  virtual void allreduce_sum(std::span<double> data) = 0;
  virtual void allreduce_max(std::span<double> data) = 0;
  // Integer sum with MPI's own reduction (MPI_INT64_T, MPI_SUM): exact and the same in any
  // order of addition as long as no partial sum overflows, which the caller bounds. The
  // exact gradient sum of --logical-shards uses it (ExactShardSum); the ring and the other
  // algorithms move floats only.
  virtual void allreduce_sum(std::span<std::int64_t> data) = 0;

  virtual void broadcast(std::span<std::byte> data, int root) = 0;
  void broadcast(std::span<float> data, int root) { broadcast(std::as_writable_bytes(data), root); }

  // Every rank's value, indexed by rank (fingerprints, host names).
  virtual std::vector<std::uint64_t> allgather(std::uint64_t value) = 0;
  virtual std::vector<std::string> allgather(const std::string& value) = 0;

  virtual void barrier() = 0;

  // Cumulative payload bytes this rank sent / received in collectives.
  virtual std::uint64_t bytes_sent() const = 0;
  virtual std::uint64_t bytes_received() const = 0;
  // Cumulative seconds this rank spent blocked in MPI waits inside allreduce: waiting for
  // slower peers and for the transfer itself (on a slow network most of a balanced ring's
  // time), but not the local reduction or copies made outside MPI.
  virtual double wait_seconds() const = 0;

  virtual std::string host_name() const = 0;
  // Ranks that share memory with this one, itself included (MPI_COMM_TYPE_SHARED): MPI's
  // idea of a node, which host names are not (emulated nodes may all report one name).
  virtual int ranks_on_node() const { return 1; }
  // This rank's node and the leaders of all nodes (one node led by this rank by default).
  virtual NodePlace node_place() const { return NodePlace{0, 1, {rank()}}; }
  // "Open MPI v4.1.4" or "none (single process)".
  virtual std::string library_version() const = 0;

  // What allreduce(data, algo, ..., compression) runs as for a vector of `bytes` bytes
  // (auto resolved), with the cost model's predictions. The same on every rank.
  virtual AllreducePlan plan_allreduce(AllreduceAlgo algo, std::size_t bytes,
                                       Compression compression) const;
  // The cost model auto chooses by from now on (MpiCommunicator; others ignore it). Call it
  // on every rank with the same model (read_cost_model_everywhere), between collectives.
  virtual void set_cost_model(const AllreduceCostModel& /*model*/) {}

  // True if this communicator's calls may come from a thread other than the one that
  // initialised MPI, one thread at a time (MPI_THREAD_SERIALIZED or better): what the
  // trainer's communication thread needs.
  virtual bool allows_serialized_threads() const { return false; }

 protected:
  // The algorithms proper, called by allreduce() only with size() > 1, a non-empty span
  // and valid enum values: data <- (sum over ranks) * scale, where scale is 1 for a sum
  // and 1/size() for a mean (each algorithm applies it where it costs least).
  virtual void allreduce_scaled(std::span<float> data, AllreduceAlgo algo, float scale,
                                Compression compression) = 0;
};

}  // namespace ringtrain
