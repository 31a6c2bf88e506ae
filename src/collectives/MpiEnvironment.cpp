// MpiEnvironment: MPI_Init_thread / MPI_Finalize, owned once per process.
#include "collectives/MpiEnvironment.h"

#include "collectives/Mpi.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "collectives/MpiCommunicator.h"
#include "collectives/SelfCommunicator.h"

namespace ringtrain {
namespace {

std::string thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
    default:
      return "level " + std::to_string(level);
  }
}

}  // namespace

MpiEnvironment::MpiEnvironment(int& argc, char**& argv) {
  int already = 0;
  MPI_Initialized(&already);
  if (already) {
    throw std::runtime_error(
        "MpiEnvironment: MPI is already initialised; MpiEnvironment must be "
        "the only owner of MPI_Init_thread/MPI_Finalize");
  }
  // SERIALIZED: the trainer's communication thread makes the MPI calls of a step while the
  // main thread computes, and the main thread makes the others (never both at once);
  // oneDNN's OpenMP threads never call MPI. A library that grants only FUNNELED still
  // runs, without overlap (Communicator::allows_serialized_threads()).
  int provided = MPI_THREAD_SINGLE;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    throw std::runtime_error("MpiEnvironment: MPI_Init_thread failed");
  }
  if (provided < MPI_THREAD_FUNNELED) {
    MPI_Finalize();
    throw std::runtime_error(
        "MpiEnvironment: needs at least MPI_THREAD_FUNNELED, the MPI library granted " +
        thread_level_name(provided));
  }
}

MpiEnvironment::~MpiEnvironment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::unique_ptr<Communicator> MpiEnvironment::world() const {
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
}

void MpiEnvironment::abort(int exit_code) noexcept {
  if (initialized()) {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  }
  std::exit(exit_code);
}

bool MpiEnvironment::initialized() noexcept {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

std::unique_ptr<Communicator> make_self_communicator() {
  return std::make_unique<SelfCommunicator>();
}

}  // namespace ringtrain
