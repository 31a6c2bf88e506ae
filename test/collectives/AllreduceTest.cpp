// Every all-reduce algorithm against exact expected sums at np 1..4: counts around the
// rank count, primes and 1M+7, sum and mean, repeated calls, pipelining corner cases,
// and the ring's byte counters. Values are small integers derived from rank and index,
// so float sums are exact whatever the order of summation.
#include "collectives/Mpi.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ExactValues.h"
#include "collectives/AllreduceTuning.h"
#include "collectives/CostCalibration.h"
#include "collectives/MpiCheck.h"
#include "collectives/MpiCommunicator.h"
#include "collectives/RabenseifnerAllreduce.h"
#include "collectives/RingAllreduce.h"
#include "support/mpi_test_util.h"

using namespace ringtrain;
using ringtrain::test::all_ranks;
using ringtrain::test::filled;
using ringtrain::test::first_mismatch;
using ringtrain::test::value;

namespace {

const AllreduceAlgo kAlgos[] = {AllreduceAlgo::kRing,
                                AllreduceAlgo::kHierarchical,
                                AllreduceAlgo::kMpi,
                                AllreduceAlgo::kParameterServer,
                                AllreduceAlgo::kRecursiveDoubling,
                                AllreduceAlgo::kRabenseifner,
                                AllreduceAlgo::kAuto};

std::vector<std::size_t> test_counts(int n) {
  std::vector<std::size_t> counts{0,
                                  1,
                                  static_cast<std::size_t>(n - 1),
                                  static_cast<std::size_t>(n),
                                  static_cast<std::size_t>(n + 1),
                                  2,
                                  3,
                                  13,
                                  31,
                                  257,
                                  1009,
                                  65537,
                                  (1u << 20) + 7};
  return counts;
}

}  // namespace

TEST_CASE("every algorithm gives the exact sum and mean for awkward counts") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int n = comm.size();
  const int r = comm.rank();
  for (AllreduceAlgo algo : kAlgos) {
    for (bool mean : {false, true}) {
      for (std::size_t count : test_counts(n)) {
        std::vector<float> data = filled(r, count);
        comm.allreduce(data, algo, mean);
        const long bad = first_mismatch(data, n, mean);
        INFO("algo " << allreduce_algo_name(algo) << " mean " << mean << " count " << count
                     << " rank " << r << " first bad index " << bad);
        REQUIRE(all_ranks(bad < 0));
      }
    }
  }
}

TEST_CASE("the ring pipeline: tiny chunks, receive depths and the rd paths stay exact") {
  const int n = test::world_size();
  const int r = test::world_rank();
  for (std::size_t chunk_bytes : {4u, 12u, 64u, 4096u}) {
    for (int depth : {1, 2, 3, 5}) {
      MpiCommunicatorOptions options;
      options.tuning.ring_chunk_bytes = chunk_bytes;
      options.tuning.ring_chunk_bytes_network = chunk_bytes;
      options.tuning.ring_recv_depth = depth;
      options.tuning.ps_chunk_bytes = chunk_bytes;
      MpiCommunicator comm(MPI_COMM_WORLD, options);
      for (std::size_t count :
           {std::size_t{1}, static_cast<std::size_t>(n + 1), std::size_t{97}, std::size_t{1000}}) {
        for (AllreduceAlgo algo : {AllreduceAlgo::kRing, AllreduceAlgo::kParameterServer,
                                   AllreduceAlgo::kRabenseifner}) {
          std::vector<float> data = filled(r, count);
          comm.allreduce(data, algo, true);
          const long bad = first_mismatch(data, n, true);
          INFO("algo " << allreduce_algo_name(algo) << " chunk " << chunk_bytes << " depth "
                       << depth << " count " << count << " first bad " << bad);
          REQUIRE(all_ranks(bad < 0));
        }
      }
    }
  }
  // rd: force plain recursive doubling, then force halving-doubling even for tiny vectors.
  for (std::size_t doubling_max : {std::size_t{1} << 30, std::size_t{0}}) {
    MpiCommunicatorOptions options;
    options.tuning.rd_doubling_max_bytes = doubling_max;
    MpiCommunicator comm(MPI_COMM_WORLD, options);
    for (std::size_t count : test_counts(n)) {
      if (count > 100000) continue;
      std::vector<float> data = filled(r, count);
      comm.allreduce(data, AllreduceAlgo::kRecursiveDoubling, false);
      const long bad = first_mismatch(data, n, false);
      INFO("rd doubling_max " << doubling_max << " count " << count << " first bad " << bad);
      REQUIRE(all_ranks(bad < 0));
    }
  }
}

TEST_CASE("repeated in-place calls on one buffer keep giving exact results") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int n = comm.size();
  const int r = comm.rank();
  for (AllreduceAlgo algo : kAlgos) {
    std::vector<float> data(10007);
    bool ok = true;
    for (int call = 0; call < 4; ++call) {
      // Same buffer (same address) every call, new contents each time.
      for (std::size_t i = 0; i < data.size(); ++i) data[i] = value(r, i, call);
      const float* before = data.data();
      comm.allreduce(data, algo, false);
      ok = ok && data.data() == before && first_mismatch(data, n, false, call) < 0;
    }
    // A second call on the result: all ranks hold the same sum S, so it becomes n*S.
    std::vector<float> twice = filled(r, 1001);
    comm.allreduce(twice, algo, false);
    std::vector<float> expected = twice;
    for (float& v : expected) v *= static_cast<float>(n);
    comm.allreduce(twice, algo, false);
    ok = ok && twice == expected;
    INFO("algo " << allreduce_algo_name(algo));
    REQUIRE(all_ranks(ok));
  }
}

TEST_CASE("all ranks hold bit-identical results (replicas stay in sync)") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  for (AllreduceAlgo algo : kAlgos) {
    // Non-integer values: rounding depends on summation order, yet every rank must agree.
    std::vector<float> data(4099);
    for (std::size_t i = 0; i < data.size(); ++i)
      data[i] = 0.1f * static_cast<float>(comm.rank() + 1) + 1e-3f * i;
    comm.allreduce(data, algo, true);
    std::uint64_t hash = 1469598103934665603ull;
    for (float v : data) {
      std::uint32_t bits;
      std::memcpy(&bits, &v, sizeof(bits));
      hash = (hash ^ bits) * 1099511628211ull;
    }
    const auto hashes = comm.allgather(hash);
    bool same = true;
    for (auto h : hashes) same = same && h == hashes[0];
    INFO("algo " << allreduce_algo_name(algo));
    REQUIRE(all_ranks(same));
  }
}

TEST_CASE("ring byte counters move 2(N-1)/N of the buffer, exactly for uneven segments") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int n = comm.size();
  const int r = comm.rank();
  for (std::size_t count :
       {std::size_t{0}, std::size_t{1}, static_cast<std::size_t>(n + 1), std::size_t{1000003}}) {
    // Expected traffic, computed here segment by segment: segment s has count/n elements,
    // plus one for s < count % n. Reduce-scatter step k sends segment r-k and receives
    // r-k-1; all-gather step k sends r+1-k and receives r-k.
    const auto seg = [&](int i) {
      const int s = ((i % n) + n) % n;
      return count / n + (static_cast<std::size_t>(s) < count % n ? 1 : 0);
    };
    std::uint64_t sent = 0;
    std::uint64_t received = 0;
    for (int k = 0; k + 1 < n; ++k) {
      sent += 4 * (seg(r - k) + seg(r + 1 - k));
      received += 4 * (seg(r - k - 1) + seg(r - k));
    }
    const std::uint64_t sent0 = comm.bytes_sent();
    const std::uint64_t received0 = comm.bytes_received();
    const double wait0 = comm.wait_seconds();
    std::vector<float> data = filled(r, count);
    comm.allreduce(data, AllreduceAlgo::kRing, false);
    const std::uint64_t d_sent = comm.bytes_sent() - sent0;
    const std::uint64_t d_received = comm.bytes_received() - received0;
    // Summed over ranks the ring moves exactly 2(N-1) * count floats.
    double totals[2] = {static_cast<double>(d_sent), static_cast<double>(d_received)};
    MPI_Allreduce(MPI_IN_PLACE, totals, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    INFO("count " << count << " rank " << r << " sent " << d_sent << " expected " << sent
                  << " received " << d_received << " expected " << received);
    REQUIRE(all_ranks(d_sent == sent && d_received == received && comm.wait_seconds() >= wait0 &&
                      totals[0] == 8.0 * (n - 1) * static_cast<double>(count) &&
                      totals[1] == totals[0]));
  }
}

TEST_CASE("ring and rab order ranks node by node whatever the numbering") {
  const int n = test::world_size();
  const int r = test::world_rank();
  for (int nodes : {1, 2, 3}) {
    if (nodes > n) continue;
    for (bool round_robin : {true, false}) {
      MpiCommunicatorOptions options;
      // Round robin: rank r on node r % nodes; blocks: ranks [k*b, (k+1)*b) on node k.
      const int block = (n + nodes - 1) / nodes;
      if (round_robin) options.round_robin_nodes = nodes;
      else options.node_group_size = block;
      const auto node_of = [&](int q) { return round_robin ? q % nodes : q / block; };
      MpiCommunicator comm(MPI_COMM_WORLD, options);
      std::vector<int> expected;
      for (int m = 0; m < nodes; ++m)
        for (int q = 0; q < n; ++q)
          if (node_of(q) == m) expected.push_back(q);
      const std::vector<int> order = comm.ring_order();
      int crossings = 0;  // ring links between two nodes: one per node when there are several
      for (int i = 0; i < n; ++i) crossings += node_of(order[i]) != node_of(order[(i + 1) % n]);
      // The algorithms follow the order: what a rank sends depends on its place in it
      // (uneven segments: 1001 elements do not split evenly for n = 2..5 except 1001 % n).
      const int place = static_cast<int>(std::find(order.begin(), order.end(), r) - order.begin());
      bool exact = true;
      for (AllreduceAlgo algo : {AllreduceAlgo::kRing, AllreduceAlgo::kRabenseifner}) {
        std::vector<float> data = filled(r, 1001);
        const std::uint64_t sent0 = comm.bytes_sent();
        comm.allreduce(data, algo, false);
        const std::uint64_t expected = 4 * (algo == AllreduceAlgo::kRing
                                                ? ring_elements_sent(1001, n, place)
                                                : rab_elements_sent(1001, n, place));
        exact = exact && first_mismatch(data, n, false) < 0 &&  // exact: the same everywhere
                comm.bytes_sent() - sent0 == expected;
      }
      int used_nodes = 0;  // nodes that hold a rank
      for (int m = 0; m < nodes; ++m)
        used_nodes += std::count_if(expected.begin(), expected.end(),
                                    [&](int q) { return node_of(q) == m; }) > 0;
      INFO("nodes " << nodes << " round robin " << round_robin << " crossings " << crossings);
      REQUIRE(all_ranks(order == expected && crossings == (used_nodes > 1 ? used_nodes : 0) &&
                        exact));
    }
  }
}

TEST_CASE("parameter server traffic converges on rank 0") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int n = comm.size();
  const std::size_t count = 5003;
  const std::uint64_t sent0 = comm.bytes_sent();
  const std::uint64_t received0 = comm.bytes_received();
  std::vector<float> data = filled(comm.rank(), count);
  comm.allreduce(data, AllreduceAlgo::kParameterServer, false);
  const std::uint64_t bytes = 4 * count;
  const std::uint64_t expected = n == 1 ? 0 : (comm.rank() == 0 ? bytes * (n - 1) : bytes);
  REQUIRE(all_ranks(comm.bytes_sent() - sent0 == expected &&
                    comm.bytes_received() - received0 == expected));
}

TEST_CASE("MPI errors on the communicator come back as runtime_error with the MPI text") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  int dummy = 0;
  // Sending to a rank outside the communicator: MPI_ERRORS_RETURN makes MPI report it.
  std::string message;
  try {
    RINGTRAIN_MPI_CHECK(MPI_Send(&dummy, 1, MPI_INT, comm.size() + 5, 0, comm.comm()));
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  const bool ok = message.find("MPI_Send") != std::string::npos &&
                  message.find("AllreduceTest.cpp") != std::string::npos &&
                  message.find("MPI_ERR_RANK") != std::string::npos;
  INFO(message);
  REQUIRE(all_ranks(ok));
  CHECK_THROWS_AS(check_mpi(MPI_ERR_COUNT, "call", "file.cpp", 3), std::runtime_error);
  CHECK_NOTHROW(check_mpi(MPI_SUCCESS, "call", "file.cpp", 3));
}

TEST_CASE("calibration: positive finite parameters, the same on every rank") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  if (comm.size() < 2) {
    REQUIRE_THROWS_AS(calibrate_cost_model(comm), std::invalid_argument);
    return;
  }
  AllreduceCostModel base;
  base.choice_margin = 0.125;  // not measured: kept
  const AllreduceCostModel m = calibrate_cost_model(comm, base);
  double values[5] = {m.alpha_s, m.beta_s_per_byte, m.gamma_s_per_byte, m.rendezvous_beta_s_per_byte,
                      m.copy_s_per_byte};
  double maxima[5];
  MPI_Allreduce(values, maxima, 5, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  bool ok = m.choice_margin == 0.125 && m.eager_limit_bytes == base.eager_limit_bytes;
  for (int i = 0; i < 5; ++i)
    ok = ok && std::isfinite(values[i]) && values[i] > 0 && values[i] == maxima[i] && values[i] < 1.0;
  INFO("alpha " << m.alpha_s << " beta " << m.beta_s_per_byte << " gamma " << m.gamma_s_per_byte);
  REQUIRE(all_ranks(ok));
}
