// Helpers for MPI tests: agree on a pass flag across ranks before asserting, so a
// failing check on one rank fails every rank instead of leaving peers waiting.
#pragma once
#include <mpi.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace ringtrain::test {

// True on every rank iff `ok` is true on every rank.
inline bool all_ranks(bool ok) {
  int local = ok ? 1 : 0;
  int global = 0;
  MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return global == 1;
}

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// This job's own scratch directory (made by mpi_catch_main, the same on every rank, removed
// when the job ends).
inline std::filesystem::path job_dir() {
  const char* dir = std::getenv("RINGTRAIN_TEST_JOB_DIR");
  if (dir == nullptr) throw std::logic_error("RINGTRAIN_TEST_JOB_DIR unset: not run by mpi_catch_main");
  return dir;
}

}  // namespace ringtrain::test
