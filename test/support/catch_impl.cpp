// Catch2's implementation, compiled once for both test mains (catch_main.cpp for the serial
// tests, mpi_catch_main.cpp for the ones under mpirun): it is the largest translation unit of
// the test build (~36 s at -O3, ~70 s under AddressSanitizer, on a 2-core Zen 3), and each main
// used to compile it again. Catch declares its Session only beside its implementation, so the
// mains reach it through run_catch().
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "support/catch_run.h"

int ringtrain::test::run_catch(int argc, char** argv) { return Catch::Session().run(argc, argv); }
