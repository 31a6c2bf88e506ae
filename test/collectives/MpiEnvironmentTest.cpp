// MpiEnvironment in a process started without mpirun: it runs as a singleton (one rank),
// owns MPI once, and finalises on destruction.
#include <catch2/catch.hpp>

#include <vector>

#include "collectives/MpiEnvironment.h"

using namespace ringtrain;

TEST_CASE("MpiEnvironment without mpirun is a one-rank world and the only MPI owner") {
  int argc = 1;
  char name[] = "collectives_environment_test";
  char* args[] = {name, nullptr};
  char** argv = args;
  REQUIRE_FALSE(MpiEnvironment::initialized());
  {
    MpiEnvironment env(argc, argv);
    CHECK(MpiEnvironment::initialized());
    CHECK_THROWS_AS(MpiEnvironment(argc, argv), std::runtime_error);
    auto world = env.world();
    CHECK(world->size() == 1);
    CHECK(world->rank() == 0);
    std::vector<float> data{1.0f, 2.0f, 3.0f};
    for (AllreduceAlgo algo :
         {AllreduceAlgo::kRing, AllreduceAlgo::kMpi, AllreduceAlgo::kParameterServer,
          AllreduceAlgo::kRecursiveDoubling, AllreduceAlgo::kAuto}) {
      world->allreduce(data, algo, true);
    }
    CHECK(data == std::vector<float>{1.0f, 2.0f, 3.0f});
    CHECK(world->library_version().rfind("Open MPI", 0) == 0);
    CHECK(world->allgather(std::uint64_t{7}) == std::vector<std::uint64_t>{7});
  }
  CHECK_FALSE(MpiEnvironment::initialized());
}
