// Names of the all-reduce algorithms and transports as the command line spells them, and
// the one all-reduce dispatch every communicator shares (the trivial cases live here).
#include "collectives/Communicator.h"

#include <stdexcept>
#include <string>

namespace ringtrain {

AllreduceAlgo parse_allreduce_algo(std::string_view name) {
  if (name == "ring") return AllreduceAlgo::kRing;
  if (name == "hier") return AllreduceAlgo::kHierarchical;
  if (name == "mpi") return AllreduceAlgo::kMpi;
  if (name == "ps") return AllreduceAlgo::kParameterServer;
  if (name == "rd") return AllreduceAlgo::kRecursiveDoubling;
  if (name == "rab") return AllreduceAlgo::kRabenseifner;
  if (name == "auto") return AllreduceAlgo::kAuto;
  throw std::invalid_argument("unknown all-reduce algorithm '" + std::string(name) +
                              "' (expected ring, hier, mpi, ps, rd, rab or auto)");
}

std::string_view allreduce_algo_name(AllreduceAlgo algo) {
  switch (algo) {
    case AllreduceAlgo::kRing:
      return "ring";
    case AllreduceAlgo::kHierarchical:
      return "hier";
    case AllreduceAlgo::kMpi:
      return "mpi";
    case AllreduceAlgo::kParameterServer:
      return "ps";
    case AllreduceAlgo::kRecursiveDoubling:
      return "rd";
    case AllreduceAlgo::kRabenseifner:
      return "rab";
    case AllreduceAlgo::kAuto:
      return "auto";
  }
  throw std::invalid_argument("invalid AllreduceAlgo value " +
                              std::to_string(static_cast<int>(algo)));
}

std::string allreduce_plan_label(const AllreducePlan& plan) {
  std::string label(allreduce_algo_name(plan.algo));
  if (plan.algo == AllreduceAlgo::kRabenseifner && plan.rab_lanes > 1) label += " x" + std::to_string(plan.rab_lanes);
  return label;
}

void Communicator::allreduce(std::span<float> data, AllreduceAlgo algo, bool mean,
                             Compression compression) {
  // Validate the enums on every path, the one-rank one included, so a bad value is
  // reported the same way whatever the job size.
  (void)allreduce_algo_name(algo);
  (void)compression_name(compression);
  const int ranks = size();
  // One rank or nothing to reduce: the sum and the mean are the data itself.
  if (ranks == 1 || data.empty()) return;
  allreduce_scaled(data, algo, mean ? 1.0f / static_cast<float>(ranks) : 1.0f, compression);
}

AllreducePlan Communicator::plan_allreduce(AllreduceAlgo algo, std::size_t /*bytes*/,
                                           Compression /*compression*/) const {
  // One rank moves nothing: whatever was asked for, nothing runs.
  AllreducePlan plan;
  plan.algo = algo == AllreduceAlgo::kAuto ? AllreduceAlgo::kRing : algo;
  plan.basis = size() == 1 ? "one rank" : "forced";
  return plan;
}

}  // namespace ringtrain
