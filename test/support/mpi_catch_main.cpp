// Catch2 main for tests run under mpirun: every rank runs the same test cases, and the
// pass flag is reduced over all ranks, so a failure on one rank fails the test on all.
// Tests must not leave a rank blocked in a collective when an assertion fails on
// another: use CHECK after collectives complete, or reduce a local flag first
// (see mpi_test_util.h). ctest's timeout turns any remaining hang into a failure.
// Every job gets a scratch directory of its own (test::job_dir()), removed at the end, so
// that jobs running side by side (ctest -j, two checkouts on one machine) share no files.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "support/catch_run.h"

namespace {

// Rank 0 makes the directory; every rank learns its name through RINGTRAIN_TEST_JOB_DIR.
std::string make_job_dir(int rank) {
  char name[4096] = {};
  if (rank == 0) {
    const std::string pattern = (std::filesystem::temp_directory_path() / "ringtrain-mpitest-XXXXXX").string();
    pattern.copy(name, sizeof name - 1);
    if (::mkdtemp(name) == nullptr) {
      std::perror("mpi_catch_main: mkdtemp");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
  ::setenv("RINGTRAIN_TEST_JOB_DIR", name, 1);
  return name;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  // SERIALIZED, as MpiEnvironment asks: the trainer's communication thread calls MPI.
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string job_dir = make_job_dir(rank);

  // Only rank 0 reports successes; every rank reports its own failures.
  int failed = ringtrain::test::run_catch(argc, argv);
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any_failed != 0 && failed == 0) {
    std::fprintf(stderr, "another rank reported a failure\n");
  }
  if (rank == 0) {
    std::error_code ec;  // after the reduction above: no rank still writes there
    std::filesystem::remove_all(job_dir, ec);
  }
  MPI_Finalize();
  return any_failed != 0 ? 1 : 0;
}
