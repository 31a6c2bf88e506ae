// A communicator of one rank without MPI: every collective is the identity, so serial
// code paths and tests run unchanged.
#pragma once

#include "collectives/Communicator.h"

namespace ringtrain {

class SelfCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }

  using Communicator::allreduce;
  void allreduce_sum(std::span<double> /*data*/) override {}
  void allreduce_max(std::span<double> /*data*/) override {}
  void allreduce_sum(std::span<std::int64_t> /*data*/) override {}
  void broadcast(std::span<std::byte> data, int root) override;
  using Communicator::broadcast;
  std::vector<std::uint64_t> allgather(std::uint64_t value) override { return {value}; }
  std::vector<std::string> allgather(const std::string& value) override { return {value}; }
  void barrier() override {}

  std::uint64_t bytes_sent() const override { return 0; }
  std::uint64_t bytes_received() const override { return 0; }
  double wait_seconds() const override { return 0.0; }

  std::string host_name() const override;
  std::string library_version() const override { return "none (single process)"; }
  bool allows_serialized_threads() const override { return true; }

 protected:
  // Never reached: Communicator::allreduce returns before it on one rank (the sum and the
  // mean over one rank are the data itself).
  void allreduce_scaled(std::span<float> /*data*/, AllreduceAlgo /*algo*/, float /*scale*/,
                        Compression /*compression*/) override {}
};

}  // namespace ringtrain
