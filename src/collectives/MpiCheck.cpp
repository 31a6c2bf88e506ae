// check_mpi: formats an MPI error code with MPI_Error_string into a std::runtime_error.
#include "collectives/MpiCheck.h"

#include "collectives/Mpi.h"

#include <stdexcept>
#include <string>

namespace ringtrain {

void check_mpi(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) {
    length = 0;
  }
  std::string message = "MPI error in " + std::string(call) + " (" + file + ":" +
                        std::to_string(line) + "): " +
                        (length > 0 ? std::string(text, static_cast<size_t>(length))
                                    : "error code " + std::to_string(rc));
  throw std::runtime_error(message);
}

}  // namespace ringtrain
