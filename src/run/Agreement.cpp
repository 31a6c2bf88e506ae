// All ranks agree on the outcome of local work.
#include "run/Agreement.h"

#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "collectives/StallRecord.h"
#include "common/CollectiveError.h"

namespace ringtrain {

void run_agreed(Communicator& comm, const std::function<void()>& work) {
  // "" = success; otherwise the exit code digit, then the message.
  std::string outcome;
  try {
    work();
  } catch (const std::invalid_argument& e) {
    outcome = std::string("2") + e.what();
  } catch (const std::exception& e) {
    outcome = std::string("1") + e.what();
  }
  const std::vector<std::string> all = [&] {
    const StallPhase phase("agreement on an outcome");
    return comm.allgather(outcome);
  }();
  // A rank that failed reports its own error; the others report the lowest failing rank's.
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    const std::string& o = outcome.empty() ? all[static_cast<std::size_t>(r)] : outcome;
    if (o.empty()) continue;
    const int code = o[0] == '2' ? 2 : 1;
    std::string message = o.substr(1);
    if (outcome.empty()) message = fmt::format("rank {} failed: {}", r, message);
    throw CollectiveError(message, code);
  }
}

}  // namespace ringtrain
