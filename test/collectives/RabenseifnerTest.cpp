// rab (RabenseifnerAllreduce.h) against exact sums at np 1..5: the bytes it sends, its send
// window and its lanes, none of which may change the result.
#include "collectives/Mpi.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "ExactValues.h"
#include "collectives/AllreduceTuning.h"
#include "collectives/MpiCommunicator.h"
#include "collectives/RabenseifnerAllreduce.h"
#include "support/mpi_test_util.h"

using namespace ringtrain;
using ringtrain::test::all_ranks;
using ringtrain::test::filled;
using ringtrain::test::first_mismatch;

namespace {

// Rank r's non-integer values: the rounding shows any change in what is added where.
std::vector<float> rounded(int r, std::size_t count) {
  std::vector<float> data(count);
  for (std::size_t i = 0; i < count; ++i)
    data[i] = 0.1f * static_cast<float>(r + 1) + 1e-3f * static_cast<float>(i % 977);
  return data;
}

}  // namespace

TEST_CASE("rab moves 2(p-1) vectors in all, plus two per folded pair, as rab_elements_sent says") {
  const int n = test::world_size();
  const int r = test::world_rank();
  int pof2 = 1;
  while (pof2 * 2 <= n) pof2 *= 2;
  for (std::size_t chunk : {std::size_t{12}, std::size_t{65408}}) {
    MpiCommunicatorOptions options;
    options.tuning.ring_chunk_bytes = chunk;
    options.tuning.ring_chunk_bytes_network = chunk;
    MpiCommunicator comm(MPI_COMM_WORLD, options);
    for (std::size_t count : {std::size_t{1}, static_cast<std::size_t>(n + 1), std::size_t{100003}}) {
      for (Compression c : {Compression::kNone, Compression::kBf16}) {
        const std::uint64_t element = c == Compression::kNone ? 4 : 2;
        const std::uint64_t sent0 = comm.bytes_sent();
        const std::uint64_t received0 = comm.bytes_received();
        std::vector<float> data = filled(r, count);
        comm.allreduce(data, AllreduceAlgo::kRabenseifner, false, c);
        const std::uint64_t d_sent = comm.bytes_sent() - sent0;
        double totals[2] = {static_cast<double>(d_sent),
                            static_cast<double>(comm.bytes_received() - received0)};
        MPI_Allreduce(MPI_IN_PLACE, totals, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        const double expected =
            static_cast<double>(element) * (2.0 * (pof2 - 1) + 2.0 * (n - pof2)) * count;
        INFO("chunk " << chunk << " count " << count << " transport " << compression_name(c)
                      << " rank " << r << " sent " << d_sent << " total " << totals[0]
                      << " expected " << expected);
        REQUIRE(all_ranks(d_sent == element * rab_elements_sent(count, n, r) &&
                          totals[0] == expected && totals[1] == expected &&
                          first_mismatch(data, n, false) < 0));
      }
    }
  }
}

TEST_CASE("rab's send window changes when chunks go, not the result: exact, and the same bits") {
  const int n = test::world_size();
  const int r = test::world_rank();
  for (Compression c : {Compression::kNone, Compression::kBf16, Compression::kFp16}) {
    for (std::size_t count : {std::size_t{1}, static_cast<std::size_t>(n + 1), std::size_t{1000},
                              std::size_t{4099}}) {
      std::vector<float> reference;
      for (std::size_t window : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{3},
                                 std::size_t{1000}}) {
        MpiCommunicatorOptions options;
        options.tuning.ring_chunk_bytes = 64;  // 8-16 elements: many chunks per round
        options.tuning.ring_chunk_bytes_network = 64;
        options.tuning.rab_send_window = window;
        MpiCommunicator comm(MPI_COMM_WORLD, options);
        std::vector<float> exact = filled(r, count);
        comm.allreduce(exact, AllreduceAlgo::kRabenseifner, false, c);
        std::vector<float> data = rounded(r, count);
        comm.allreduce(data, AllreduceAlgo::kRabenseifner, true, c);
        if (window == 0) reference = data;
        const bool same = std::memcmp(data.data(), reference.data(), count * sizeof(float)) == 0;
        INFO("transport " << compression_name(c) << " count " << count << " window " << window
                          << " rank " << r << " same bits as window 0 " << same);
        REQUIRE(all_ranks(first_mismatch(exact, n, false) < 0 && same));
      }
    }
  }
}

// rab in lanes (forced; auto chooses them only across nodes). Every lane count must give the
// exact sum on integer inputs, the same bits on every rank, and, with fp32 transport, the same
// bits as one lane on rounded inputs (an element's sum is the same tree of pairwise additions
// whoever owns it). np 3 and 5 fold, so the fold and unfold run in lanes too. Lane counts
// above the element count leave lanes empty (count 1 with 7 lanes).
TEST_CASE("rab in lanes: exact, the same bits on every rank, fp32 the same bits as one lane") {
  const int n = test::world_size();
  const int r = test::world_rank();
  // Rank 0's vector, for the comparison on every rank.
  const auto rank0 = [](std::vector<float> data) {
    MPI_Bcast(data.data(), static_cast<int>(data.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
    return data;
  };
  for (Compression c : {Compression::kNone, Compression::kBf16, Compression::kFp16}) {
    for (std::size_t count : {std::size_t{1}, static_cast<std::size_t>(n + 1), std::size_t{1000},
                              std::size_t{4099}}) {
      std::vector<float> one_lane;
      for (int lanes : {1, 2, 3, 4, 7, kMaxRabLanes}) {
        for (std::size_t window : {std::size_t{0}, std::size_t{1}, std::size_t{16}}) {
          MpiCommunicatorOptions options;
          options.tuning.ring_chunk_bytes = 64;  // 8-16 elements: several chunks per round and lane
          options.tuning.ring_chunk_bytes_network = 64;
          options.tuning.rab_send_window = window;
          options.tuning.rab_lanes = lanes;
          MpiCommunicator comm(MPI_COMM_WORLD, options);
          REQUIRE(comm.plan_allreduce(AllreduceAlgo::kRabenseifner, count * 4, c).rab_lanes == lanes);
          std::vector<float> exact = filled(r, count);
          comm.allreduce(exact, AllreduceAlgo::kRabenseifner, false, c);
          std::vector<float> data = rounded(r, count);
          comm.allreduce(data, AllreduceAlgo::kRabenseifner, true, c);
          if (lanes == 1 && window == 0) one_lane = data;
          const bool everywhere = std::memcmp(data.data(), rank0(data).data(), count * sizeof(float)) == 0 &&
                                  std::memcmp(exact.data(), rank0(exact).data(), count * sizeof(float)) == 0;
          const bool as_one_lane =
              c != Compression::kNone || std::memcmp(data.data(), one_lane.data(), count * sizeof(float)) == 0;
          INFO("transport " << compression_name(c) << " count " << count << " lanes " << lanes << " window "
                            << window << " rank " << r << " same bits everywhere " << everywhere
                            << " fp32 same as one lane " << as_one_lane);
          REQUIRE(all_ranks(first_mismatch(exact, n, false) < 0 && everywhere && as_one_lane));
        }
      }
    }
  }
}

TEST_CASE("rab in lanes sends what rab_elements_sent says for its lanes, 2(p-1) vectors in all") {
  const int n = test::world_size();
  const int r = test::world_rank();
  int pof2 = 1;
  while (pof2 * 2 <= n) pof2 *= 2;
  for (int lanes : {2, 5, 16}) {
    MpiCommunicatorOptions options;
    options.tuning.rab_lanes = lanes;
    MpiCommunicator comm(MPI_COMM_WORLD, options);
    for (std::size_t count : {std::size_t{3}, static_cast<std::size_t>(n + 1), std::size_t{100003}}) {
      const std::uint64_t sent0 = comm.bytes_sent();
      std::vector<float> data = filled(r, count);
      comm.allreduce(data, AllreduceAlgo::kRabenseifner, false);
      const std::uint64_t d_sent = comm.bytes_sent() - sent0;
      double total = static_cast<double>(d_sent);
      MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      const double expected = 4.0 * (2.0 * (pof2 - 1) + 2.0 * (n - pof2)) * static_cast<double>(count);
      INFO("lanes " << lanes << " count " << count << " rank " << r << " sent " << d_sent << " total " << total);
      REQUIRE(all_ranks(d_sent == 4 * rab_elements_sent(count, n, r, lanes) && total == expected &&
                        first_mismatch(data, n, false) < 0));
    }
  }
  // The lanes' split is the vector's even partition: at 1 element only lane 0 has one.
  CHECK(rab_elements_sent(1, 4, 0, 16) == rab_elements_sent(1, 4, 0));
}

TEST_CASE("rab refuses a lane count outside 1..kMaxRabLanes before sending anything") {
  MPI_Comm comm = MPI_COMM_WORLD;
  AllreduceScratch scratch;
  TrafficStats stats;
  std::vector<float> data(10, 1.0f);
  for (int lanes : {0, -1, kMaxRabLanes + 1}) {
    bool threw = false;
    try {
      rabenseifner_allreduce(comm, data, 1.0f, Compression::kNone, 64, 0, {}, lanes, scratch, stats);
    } catch (const std::invalid_argument& e) {
      threw = std::string(e.what()).find("lanes") != std::string::npos;
    }
    INFO("lanes " << lanes);
    REQUIRE(all_ranks(threw && stats.bytes_sent == 0));
  }
}

