// Catch2 main for tests run under mpirun: every rank runs the same test cases, and the
// pass flag is reduced over all ranks, so a failure on one rank fails the test on all.
// Tests must not leave a rank blocked in a collective when an assertion fails on
// another: use CHECK after collectives complete, or reduce a local flag first
// (see mpi_test_util.h). ctest's timeout turns any remaining hang into a failure.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
  int provided = 0;
  // SERIALIZED, as MpiEnvironment asks: the trainer's communication thread calls MPI.
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  Catch::Session session;
  // Only rank 0 reports successes; every rank reports its own failures.
  int failed = session.run(argc, argv);
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any_failed != 0 && failed == 0) {
    std::fprintf(stderr, "another rank reported a failure\n");
  }
  MPI_Finalize();
  return any_failed != 0 ? 1 : 0;
}
