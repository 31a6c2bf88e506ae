// Names of the all-reduce algorithms, as the command line spells them.
#include "collectives/Communicator.h"

#include <stdexcept>
#include <string>

namespace ringtrain {

AllreduceAlgo parse_allreduce_algo(std::string_view name) {
  if (name == "ring") return AllreduceAlgo::kRing;
  if (name == "mpi") return AllreduceAlgo::kMpi;
  if (name == "ps") return AllreduceAlgo::kParameterServer;
  if (name == "rd") return AllreduceAlgo::kRecursiveDoubling;
  if (name == "auto") return AllreduceAlgo::kAuto;
  throw std::invalid_argument("unknown all-reduce algorithm '" + std::string(name) +
                              "' (expected ring, mpi, ps, rd or auto)");
}

std::string_view allreduce_algo_name(AllreduceAlgo algo) {
  switch (algo) {
    case AllreduceAlgo::kRing:
      return "ring";
    case AllreduceAlgo::kMpi:
      return "mpi";
    case AllreduceAlgo::kParameterServer:
      return "ps";
    case AllreduceAlgo::kRecursiveDoubling:
      return "rd";
    case AllreduceAlgo::kAuto:
      return "auto";
  }
  throw std::invalid_argument("invalid AllreduceAlgo value " +
                              std::to_string(static_cast<int>(algo)));
}

}  // namespace ringtrain
