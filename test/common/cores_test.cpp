// Threads per rank: --threads, else OMP_NUM_THREADS, else the rank's share of the node.
#include <catch2/catch.hpp>

#include <stdexcept>

#include "common/Cores.h"

using ringtrain::choose_threads;
using ringtrain::oversubscription_warning;

TEST_CASE("--threads wins over OMP_NUM_THREADS and the cores") {
  const auto c = choose_threads(3, "8", 2, 16, 16);
  CHECK(c.threads == 3);
  CHECK(c.source == "--threads");
}

TEST_CASE("OMP_NUM_THREADS wins over the cores when set") {
  CHECK(choose_threads(0, "5", 2, 16, 16).threads == 5);
  CHECK(choose_threads(0, "4,2", 2, 16, 16).threads == 4);  // nested levels: the first is the rank's
  CHECK(choose_threads(0, "5", 2, 16, 16).source == "OMP_NUM_THREADS");
  CHECK_THROWS_AS(choose_threads(0, "two", 2, 16, 16), std::invalid_argument);
  CHECK_THROWS_AS(choose_threads(0, "0", 2, 16, 16), std::invalid_argument);
  CHECK_THROWS_AS(choose_threads(0, "3x", 2, 16, 16), std::invalid_argument);
}

TEST_CASE("by default each rank gets its share of the node, no more than its affinity mask") {
  CHECK(choose_threads(0, nullptr, 4, 16, 0).threads == 4);
  CHECK(choose_threads(0, "", 3, 16, 16).threads == 5);
  CHECK(choose_threads(0, nullptr, 2, 16, 1).threads == 1);  // mpirun bound the rank to one core
  CHECK(choose_threads(0, nullptr, 9, 4, 4).threads == 1);   // more ranks than cores: still one
}

TEST_CASE("a warning when ranks x threads exceed the node's cores") {
  CHECK_FALSE(oversubscription_warning(2, 2, 4).has_value());
  const auto w = oversubscription_warning(2, 3, 4);
  REQUIRE(w.has_value());
  CHECK(w->find("2 rank(s) x 3 thread(s)") != std::string::npos);
  CHECK(w->find("4 core(s)") != std::string::npos);
}
