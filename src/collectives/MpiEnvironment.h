// The one RAII owner of MPI_Init_thread / MPI_Finalize. A process started without mpirun
// runs as a singleton (one rank).
#pragma once

#include <memory>

#include "collectives/Communicator.h"

namespace ringtrain {

class MpiEnvironment {
 public:
  // Initialises MPI (MPI_THREAD_SERIALIZED requested; throws std::runtime_error if the
  // library grants less than MPI_THREAD_FUNNELED).
  MpiEnvironment(int& argc, char**& argv);
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

  // A communicator over all ranks (its own MPI_Comm_dup of MPI_COMM_WORLD).
  std::unique_ptr<Communicator> world() const;

  // Ends every rank of the job: MPI_Abort on MPI_COMM_WORLD when MPI is up, else exit.
  [[noreturn]] static void abort(int exit_code) noexcept;

  static bool initialized() noexcept;
};

// A communicator of one rank: every collective is the identity (mean over one rank).
std::unique_ptr<Communicator> make_self_communicator();

}  // namespace ringtrain
