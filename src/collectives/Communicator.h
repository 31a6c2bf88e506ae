// The collective operations the trainer needs, behind one interface: MpiCommunicator for
// real runs, SelfCommunicator (one rank) so serial code and tests need no MPI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ringtrain {

struct AllreduceTuning;  // collectives/AllreduceTuning.h

enum class AllreduceAlgo {
  kRing,               // reduce-scatter + all-gather over point-to-point (2(N-1)/N per rank)
  kMpi,                // MPI_Allreduce as Open MPI implements it
  kParameterServer,    // everyone -> rank 0, sum, rank 0 -> everyone
  kRecursiveDoubling,  // Rabenseifner's recursive halving / doubling
  kAuto,               // chosen by message size from measured crossovers
};

// "ring" | "mpi" | "ps" | "rd" | "auto"; throws std::invalid_argument otherwise.
AllreduceAlgo parse_allreduce_algo(std::string_view name);
std::string_view allreduce_algo_name(AllreduceAlgo algo);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place: data <- sum over ranks, then * (1 / size()) if mean.
  virtual void allreduce(std::span<float> data, AllreduceAlgo algo, bool mean) = 0;
  // Small exact sums (metrics), in place, with MPI's own reduction.
  virtual void allreduce_sum(std::span<double> data) = 0;
  virtual void allreduce_max(std::span<double> data) = 0;

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
  // "Open MPI v4.1.4" or "none (single process)".
  virtual std::string library_version() const = 0;

  // True if this communicator's calls may come from a thread other than the one that
  // initialised MPI, one thread at a time (MPI_THREAD_SERIALIZED or better): what the
  // trainer's communication thread needs.
  virtual bool allows_serialized_threads() const { return false; }

  // Chunk sizes and `auto` thresholds for the hand-written algorithms (added for
  // allreduce_bench and experiments; communicators without tunables ignore it).
  virtual void set_allreduce_tuning(const AllreduceTuning& /*tuning*/) {}
};

}  // namespace ringtrain
