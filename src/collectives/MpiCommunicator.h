// Communicator over an MPI communicator: owns an MPI_Comm_dup with MPI_ERRORS_RETURN, so
// every failing MPI call becomes a std::runtime_error (MpiCheck.h) instead of an abort.
#pragma once

#include "collectives/Mpi.h"

#include <vector>

#include "collectives/AllreduceTuning.h"
#include "collectives/Communicator.h"
#include "collectives/TrafficStats.h"

namespace ringtrain {

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates `parent` (collective over it). MPI must be initialised.
  explicit MpiCommunicator(MPI_Comm parent);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allreduce(std::span<float> data, AllreduceAlgo algo, bool mean) override;
  void allreduce_sum(std::span<double> data) override;
  void allreduce_max(std::span<double> data) override;
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
  std::string library_version() const override;

  void set_allreduce_tuning(const AllreduceTuning& tuning) override { tuning_ = tuning; }
  const AllreduceTuning& allreduce_tuning() const { return tuning_; }

  MPI_Comm comm() const { return comm_; }
  // True when every rank shares this rank's host (MPI_COMM_TYPE_SHARED covers them all).
  bool single_host() const { return single_host_; }

 private:
  void reduce_doubles(std::span<double> data, MPI_Op op);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  bool single_host_ = true;
  AllreduceTuning tuning_;
  TrafficStats stats_;
  std::vector<float> scratch_;  // receive space of the hand-written algorithms
};

}  // namespace ringtrain
