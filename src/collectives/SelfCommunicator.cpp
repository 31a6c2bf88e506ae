// SelfCommunicator: the argument check of the one-rank broadcast, and the host name.
#include "collectives/SelfCommunicator.h"

#include <unistd.h>

#include <stdexcept>
#include <string>

namespace ringtrain {

void SelfCommunicator::broadcast(std::span<std::byte> /*data*/, int root) {
  if (root != 0) {
    throw std::invalid_argument("broadcast: root " + std::to_string(root) +
                                " outside [0, 1) on a one-rank communicator");
  }
}

std::string SelfCommunicator::host_name() const {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

}  // namespace ringtrain
