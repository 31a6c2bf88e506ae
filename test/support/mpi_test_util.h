// Helpers for MPI tests: agree on a pass flag across ranks before asserting, so a
// failing check on one rank fails every rank instead of leaving peers waiting.
#pragma once
#include <mpi.h>

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

}  // namespace ringtrain::test
