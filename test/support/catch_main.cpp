// Catch2 main for the serial tests (no MPI).
#include "support/catch_run.h"

int main(int argc, char** argv) { return ringtrain::test::run_catch(argc, argv); }
