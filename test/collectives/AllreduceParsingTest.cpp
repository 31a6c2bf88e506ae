// Algorithm names, size parsing, the even partition and auto's choice.
#include <catch2/catch.hpp>

#include "collectives/AllreduceTuning.h"
#include "collectives/BenchRunner.h"
#include "collectives/EvenPartition.h"
#include "collectives/RingAllreduce.h"

using namespace ringtrain;

TEST_CASE("allreduce algorithm names round-trip and bad names throw") {
  for (const char* name : {"ring", "mpi", "ps", "rd", "auto"}) {
    CHECK(allreduce_algo_name(parse_allreduce_algo(name)) == name);
  }
  CHECK(parse_allreduce_algo("ps") == AllreduceAlgo::kParameterServer);
  CHECK(parse_allreduce_algo("rd") == AllreduceAlgo::kRecursiveDoubling);
  CHECK_THROWS_AS(parse_allreduce_algo("Ring"), std::invalid_argument);
  CHECK_THROWS_AS(parse_allreduce_algo(""), std::invalid_argument);
  CHECK_THROWS_AS(parse_allreduce_algo("all"), std::invalid_argument);
}

TEST_CASE("byte sizes with K/M/G suffixes") {
  CHECK(parse_byte_size("4") == 4);
  CHECK(parse_byte_size("64K") == 65536);
  CHECK(parse_byte_size("256M") == 268435456);
  CHECK(parse_byte_size("1G") == 1073741824);
  CHECK(parse_byte_size("3MiB") == 3 * 1048576);
  CHECK_THROWS_AS(parse_byte_size("12Q"), std::invalid_argument);
  CHECK_THROWS_AS(parse_byte_size("K"), std::invalid_argument);
  CHECK_THROWS_AS(parse_byte_size(""), std::invalid_argument);
  CHECK_THROWS_AS(parse_byte_size("99999999999999999999999"), std::invalid_argument);
  CHECK(parse_size_list("1K,4,2M") == std::vector<std::size_t>{1024, 4, 2097152});
  CHECK_THROWS_AS(parse_size_list("1K,,2M"), std::invalid_argument);
  CHECK(power_of_two_sizes(4, 64) == std::vector<std::size_t>{4, 8, 16, 32, 64});
  CHECK(power_of_two_sizes(4, 63) == std::vector<std::size_t>{4, 8, 16, 32});
  CHECK_THROWS_AS(power_of_two_sizes(64, 4), std::invalid_argument);
  CHECK_THROWS_AS(power_of_two_sizes(0, 4), std::invalid_argument);
}

TEST_CASE("algorithm lists: all is mpi first, then the hand-written ones") {
  const auto all = parse_algo_list("all");
  REQUIRE(all.size() == 5);
  CHECK(all.front() == AllreduceAlgo::kMpi);
  CHECK(parse_algo_list("ring,mpi") ==
        std::vector<AllreduceAlgo>{AllreduceAlgo::kRing, AllreduceAlgo::kMpi});
  CHECK_THROWS_AS(parse_algo_list("ring,bogus"), std::invalid_argument);
}

TEST_CASE("even partition: sizes differ by at most one and tile the range") {
  for (std::size_t count : {0u, 1u, 3u, 4u, 5u, 17u, 1000003u}) {
    for (std::size_t parts : {1u, 2u, 3u, 4u, 7u}) {
      std::size_t next = 0;
      std::size_t smallest = count;
      std::size_t largest = 0;
      for (std::size_t i = 0; i < parts; ++i) {
        CHECK(partition_begin(count, parts, i) == next);
        const std::size_t n = partition_size(count, parts, i);
        smallest = std::min(smallest, n);
        largest = std::max(largest, n);
        next += n;
      }
      CHECK(next == count);
      CHECK(largest - smallest <= 1);
    }
  }
}

TEST_CASE("ring byte formulas match a step-by-step count of the segments moved") {
  for (std::size_t count : {0u, 1u, 2u, 5u, 6u, 7u, 1000u, 1000003u}) {
    for (int n : {1, 2, 3, 4, 5}) {
      // Segment sizes computed here independently: count/n, the first count%n get one more.
      const auto seg = [&](int i) {
        const int s = ((i % n) + n) % n;
        return count / n + (static_cast<std::size_t>(s) < count % n ? 1 : 0);
      };
      for (int r = 0; r < n; ++r) {
        std::uint64_t sent = 0;
        std::uint64_t received = 0;
        for (int s = 0; s + 1 < n; ++s) {
          sent += seg(r - s);  // reduce-scatter
          received += seg(r - s - 1);
          sent += seg(r + 1 - s);  // all-gather
          received += seg(r - s);
        }
        CHECK(ring_bytes_sent(count, n, r) == 4 * sent);
        CHECK(ring_bytes_received(count, n, r) == 4 * received);
      }
    }
  }
}

TEST_CASE("auto picks rd below the host-dependent threshold and the ring from it on") {
  AllreduceTuning tuning;
  tuning.auto_ring_min_bytes = 1000;
  tuning.auto_ring_min_bytes_single_host = 5000;
  CHECK(choose_auto_algo(999, 4, false, tuning) == AllreduceAlgo::kRecursiveDoubling);
  CHECK(choose_auto_algo(1000, 4, false, tuning) == AllreduceAlgo::kRing);
  CHECK(choose_auto_algo(4999, 4, true, tuning) == AllreduceAlgo::kRecursiveDoubling);
  CHECK(choose_auto_algo(5000, 4, true, tuning) == AllreduceAlgo::kRing);
  CHECK(choose_auto_algo(std::size_t{1} << 26, 2, true, tuning) == AllreduceAlgo::kRing);
}

TEST_CASE("bench values are small integers, so float sums of them are exact") {
  for (int r = 0; r < 64; ++r) {
    for (std::size_t i = 0; i < 100; ++i) {
      const float v = bench_value(r, i);
      CHECK(v == static_cast<float>(static_cast<int>(v)));
      CHECK(v >= -6.0f);
      CHECK(v <= 6.0f);
    }
  }
}
