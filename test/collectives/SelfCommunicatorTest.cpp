// SelfCommunicator: every collective over one rank is the identity.
#include <catch2/catch.hpp>

#include <vector>

#include "collectives/MpiEnvironment.h"
#include "collectives/SelfCommunicator.h"

using namespace ringtrain;

TEST_CASE("SelfCommunicator is one rank whose collectives leave data unchanged") {
  auto comm = make_self_communicator();
  REQUIRE(comm->rank() == 0);
  REQUIRE(comm->size() == 1);
  for (AllreduceAlgo algo :
       {AllreduceAlgo::kRing, AllreduceAlgo::kHierarchical, AllreduceAlgo::kMpi,
        AllreduceAlgo::kParameterServer, AllreduceAlgo::kRecursiveDoubling, AllreduceAlgo::kAuto}) {
    for (bool mean : {false, true}) {
      for (Compression c : {Compression::kNone, Compression::kBf16, Compression::kFp16}) {
        // 1.1f is not a bf16 value: one rank sends nothing, so nothing is rounded.
        std::vector<float> data{1.5f, -2.0f, 3.25f, 1.1f};
        comm->allreduce(data, algo, mean, c);
        CHECK(data == std::vector<float>{1.5f, -2.0f, 3.25f, 1.1f});
      }
    }
  }
  std::vector<double> d{1.0, -7.5};
  comm->allreduce_sum(d);
  comm->allreduce_max(d);
  CHECK(d == std::vector<double>{1.0, -7.5});

  std::vector<float> b{4.0f, 5.0f};
  comm->broadcast(std::span<float>(b), 0);
  CHECK(b == std::vector<float>{4.0f, 5.0f});
  CHECK_THROWS_AS(comm->broadcast(std::span<float>(b), 1), std::invalid_argument);

  CHECK(comm->allgather(std::uint64_t{42}) == std::vector<std::uint64_t>{42});
  CHECK(comm->allgather(std::string("node-a")) == std::vector<std::string>{"node-a"});
  comm->barrier();
  CHECK(comm->bytes_sent() == 0);
  CHECK(comm->bytes_received() == 0);
  CHECK(comm->wait_seconds() == 0.0);
  CHECK(comm->library_version() == "none (single process)");
  CHECK_FALSE(comm->host_name().empty());
}

TEST_CASE("SelfCommunicator rejects an invalid algorithm or compression value") {
  SelfCommunicator comm;
  std::vector<float> data{1.0f};
  CHECK_THROWS_AS(comm.allreduce(data, static_cast<AllreduceAlgo>(99), false),
                  std::invalid_argument);
  CHECK_THROWS_AS(comm.allreduce(data, AllreduceAlgo::kRing, false, static_cast<Compression>(9)),
                  std::invalid_argument);
}
