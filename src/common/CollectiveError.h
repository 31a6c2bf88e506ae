// An error every rank raises together (a configuration mismatch, a bad checkpoint, a NaN
// loss): the apps report it on every rank and exit without MPI_Abort.
#pragma once

#include <stdexcept>
#include <string>

namespace ringtrain {

class CollectiveError : public std::runtime_error {
 public:
  explicit CollectiveError(const std::string& message, int exit_code = 1)
      : std::runtime_error(message), exit_code_(exit_code) {}
  // 2 for a configuration (usage) error, 1 for anything else.
  int exit_code() const noexcept { return exit_code_; }

 private:
  int exit_code_;
};

}  // namespace ringtrain
