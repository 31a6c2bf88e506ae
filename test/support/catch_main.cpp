// Catch2 main for the serial tests (no MPI).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
