// Broadcast, allgather, barrier and the double and int64 reductions of MpiCommunicator at np 1..4.
#include "collectives/Mpi.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "collectives/MpiCommunicator.h"
#include "support/mpi_test_util.h"

using namespace ringtrain;
using ringtrain::test::all_ranks;

TEST_CASE("broadcast from every root delivers the root's bytes") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int n = comm.size();
  for (int root = 0; root < n; ++root) {
    for (std::size_t count :
         {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{300001}}) {
      std::vector<float> data(count);
      for (std::size_t i = 0; i < count; ++i) {
        data[i] = comm.rank() == root ? static_cast<float>(i % 1000) + 0.5f * root : -1.0f;
      }
      comm.broadcast(std::span<float>(data), root);
      bool ok = true;
      for (std::size_t i = 0; i < count; ++i)
        ok = ok && data[i] == static_cast<float>(i % 1000) + 0.5f * root;
      INFO("root " << root << " count " << count);
      REQUIRE(all_ranks(ok));
    }
  }
  std::vector<std::byte> bytes(3);
  CHECK_THROWS_AS(comm.broadcast(bytes, n), std::invalid_argument);
  CHECK_THROWS_AS(comm.broadcast(bytes, -1), std::invalid_argument);
}

TEST_CASE("allgather of integers and of strings of different lengths, indexed by rank") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int n = comm.size();
  const auto numbers = comm.allgather(std::uint64_t{1000} +
                                      3 * static_cast<std::uint64_t>(comm.rank()) + (1ull << 40));
  // Rank r sends 3r 'x's then "r<rank>": lengths differ per rank.
  const auto label = [](int r) {
    std::string s(static_cast<std::size_t>(r) * 3, 'x');
    s += 'r';
    s += std::to_string(r);
    return s;
  };
  const std::string mine = label(comm.rank());
  const auto strings = comm.allgather(mine);
  bool ok = numbers.size() == static_cast<std::size_t>(n) &&
            strings.size() == static_cast<std::size_t>(n);
  for (int r = 0; ok && r < n; ++r) {
    ok = numbers[r] == 1000 + 3 * static_cast<std::uint64_t>(r) + (1ull << 40) &&
         strings[r] == label(r);
  }
  const auto empties = comm.allgather(std::string());
  for (const auto& s : empties) ok = ok && s.empty();
  REQUIRE(all_ranks(ok));
}

TEST_CASE("allreduce_sum and allreduce_max of doubles") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int n = comm.size();
  const int r = comm.rank();
  std::vector<double> sums{static_cast<double>(r), 0.25, -1.0 * r * r};
  std::vector<double> maxes{static_cast<double>(r), -static_cast<double>(r),
                            r == n - 1 ? 1e300 : 0.0};
  comm.allreduce_sum(sums);
  comm.allreduce_max(maxes);
  double square_sum = 0;
  for (int k = 0; k < n; ++k) square_sum += k * k;
  const bool ok = sums[0] == n * (n - 1) / 2.0 && sums[1] == 0.25 * n && sums[2] == -square_sum &&
                  maxes[0] == n - 1 && maxes[1] == 0.0 && maxes[2] == 1e300;
  REQUIRE(all_ranks(ok));
}

TEST_CASE("allreduce_sum of int64: exact past one 8 MiB call, large values kept, bytes counted") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const auto n = static_cast<std::int64_t>(comm.size());
  const auto r = static_cast<std::int64_t>(comm.rank());
  // 1 Mi + 5 values: two calls of MPI_Allreduce (the communicator cuts at 8 MiB), and values
  // near 2^50 that a double-based sum would round (r + 1 is added to 2^50 + i x 3).
  const std::size_t count = (std::size_t{1} << 20) + 5;
  std::vector<std::int64_t> data(count);
  for (std::size_t i = 0; i < count; ++i) {
    data[i] = (i % 2 == 0 ? 1 : -1) * ((std::int64_t{1} << 50) + static_cast<std::int64_t>(i) * 3 + r + 1);
  }
  const std::uint64_t sent_before = comm.bytes_sent();
  comm.allreduce_sum(std::span<std::int64_t>(data));
  bool ok = true;
  for (std::size_t i = 0; ok && i < count; ++i) {
    const std::int64_t want =
        (i % 2 == 0 ? 1 : -1) * (n * ((std::int64_t{1} << 50) + static_cast<std::int64_t>(i) * 3) + n * (n + 1) / 2);
    ok = data[i] == want;
  }
  const std::uint64_t sent = comm.bytes_sent() - sent_before;
  ok = ok && sent == (n > 1 ? count * sizeof(std::int64_t) : 0);
  REQUIRE(all_ranks(ok));
}

TEST_CASE("barrier: nobody leaves before the last rank arrives") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int n = comm.size();
  // steady_clock is CLOCK_MONOTONIC, one clock for all processes of a host; the ordering
  // check is only meaningful when every rank runs on the same host (as under ctest).
  const auto hosts = comm.allgather(comm.host_name());
  bool one_host = true;
  for (const auto& h : hosts) one_host = one_host && h == hosts[0];
  const auto now = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  if (comm.rank() == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double entered = now();
  comm.barrier();
  const double left = now();
  // times[0]: when the last rank entered; -times[1]: the earliest exit of any rank.
  std::vector<double> times{comm.rank() == n - 1 ? entered : -1e300, -left};
  comm.allreduce_max(times);
  const bool ok = !one_host || -times[1] >= times[0];
  INFO("last entry " << times[0] << " earliest exit " << -times[1]);
  REQUIRE(all_ranks(ok));
}

TEST_CASE("one rank's failing check is seen by all ranks (the all_ranks pattern)") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  CHECK(ringtrain::test::all_ranks(true));
  CHECK_FALSE(ringtrain::test::all_ranks(comm.rank() != 0));
  CHECK_FALSE(ringtrain::test::all_ranks(comm.rank() != comm.size() - 1));
}

TEST_CASE("host name and library version") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const std::string version = comm.library_version();
  const bool ok = !comm.host_name().empty() && version.rfind("Open MPI v", 0) == 0 &&
                  version.find('\n') == std::string::npos && version.find(',') == std::string::npos;
  INFO(version);
  REQUIRE(all_ranks(ok));
}
