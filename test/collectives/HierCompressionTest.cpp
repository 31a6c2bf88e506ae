// hier with forced node groupings (blocks of one, two and three ranks per "node", round
// robin over two and three "nodes" -- equal and unequal nodes -- and the real
// MPI_COMM_TYPE_SHARED split), its network traffic, and the 16-bit transports, at np
// 1..5: exact sums of small integers, stated error bounds for general values, fp16 never overflowing, bit-identical
// results on every rank for every algorithm and transport, and the fp32-only algorithms
// refusing 16-bit transport on every rank.
#include "collectives/Mpi.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "collectives/AllreduceCostModel.h"
#include "collectives/MpiCommunicator.h"
#include "collectives/RingAllreduce.h"
#include "support/mpi_test_util.h"

using namespace ringtrain;
using ringtrain::test::all_ranks;

namespace {

// Rank r's value at index i: an integer in [-8, 8]; sums of up to 16 such values are
// exact in bf16 (8 significant bits) and fp16.
float exact_bf16_value(int rank, std::size_t i) {
  return static_cast<float>(static_cast<int>((i * 29 + static_cast<std::size_t>(rank) * 13) % 17) - 8);
}

long first_bf16_mismatch(const std::vector<float>& data, int ranks, float scale_of_value, bool mean) {
  const float scale = 1.0f / static_cast<float>(ranks);
  for (std::size_t i = 0; i < data.size(); ++i) {
    int sum = 0;
    for (int r = 0; r < ranks; ++r) sum += static_cast<int>(exact_bf16_value(r, i));
    float expected = static_cast<float>(sum) * scale_of_value;
    if (mean) expected *= scale;
    if (data[i] != expected) return static_cast<long>(i);
  }
  return -1;
}

std::uint64_t hash_of(const std::vector<float>& data) {
  std::uint64_t hash = 1469598103934665603ull;
  for (float v : data) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    hash = (hash ^ bits) * 1099511628211ull;
  }
  return hash;
}

bool same_on_all_ranks(Communicator& comm, const std::vector<float>& data) {
  const auto hashes = comm.allgather(hash_of(data));
  for (auto h : hashes)
    if (h != hashes[0]) return false;
  return true;
}

const Compression kTransports[] = {Compression::kNone, Compression::kBf16, Compression::kFp16};

const std::vector<std::size_t> kCounts = {1, 2, 3, 5, 13, 257, 4099, 100003};

// A forced node grouping of the test's ranks (all on one host): k ranks per "node" in
// blocks (k = 0: the real MPI_COMM_TYPE_SHARED split, one node), or round robin over k
// "nodes" (rank q on node q % k).
struct Grouping {
  int block = 0;
  int round_robin = 0;
};

MpiCommunicatorOptions options_for(const Grouping& g) {
  MpiCommunicatorOptions options;
  options.node_group_size = g.block;
  options.round_robin_nodes = g.round_robin;
  return options;
}

// The layout the grouping implies for n ranks, computed here from the node of each rank.
NodeLayout expected_layout(const Grouping& g, int n) {
  std::vector<int> sizes;
  for (int q = 0; q < n; ++q) {
    const int node = g.round_robin > 0 ? q % g.round_robin : (g.block > 0 ? q / g.block : 0);
    if (node >= static_cast<int>(sizes.size())) sizes.resize(static_cast<std::size_t>(node) + 1, 0);
    ++sizes[static_cast<std::size_t>(node)];
  }
  NodeLayout layout{n, 0, 0, n, 0};
  for (int size : sizes) {
    layout.nodes += 1;
    layout.nodes_with_several_ranks += size > 1;
    layout.min_ranks_per_node = std::min(layout.min_ranks_per_node, size);
    layout.max_ranks_per_node = std::max(layout.max_ranks_per_node, size);
  }
  return layout;
}

// Equal and unequal nodes: blocks of 1, 2 and 3 (np 3 and 5 leave a node of one rank,
// np 4 with blocks of 3 one of three and one of one), round robin over 2 and 3 nodes, and
// the real split.
const Grouping kGroupings[] = {{1, 0}, {2, 0}, {3, 0}, {0, 2}, {0, 3}, {0, 0}};

}  // namespace

TEST_CASE("hier: exact sums and the same bits everywhere for equal and unequal node groupings") {
  const int n = test::world_size();
  const int r = test::world_rank();
  for (const Grouping& g : kGroupings) {
   for (std::size_t chunk : {std::size_t{12}, std::size_t{4096}}) {
    MpiCommunicatorOptions options = options_for(g);
    // The network phase's ring in chunks of 3 floats (many, a short last one) or 1024.
    options.tuning.ring_chunk_bytes = chunk;
    options.tuning.ring_chunk_bytes_network = chunk;
    MpiCommunicator comm(MPI_COMM_WORLD, options);
    const NodeLayout e = expected_layout(g, n);
    const NodeLayout& layout = comm.layout();
    INFO("block " << g.block << " round robin " << g.round_robin << " nodes " << layout.nodes << " several "
                  << layout.nodes_with_several_ranks << " ranks per node " << layout.min_ranks_per_node << "-"
                  << layout.max_ranks_per_node << " chunk " << chunk);
    REQUIRE(all_ranks(layout.ranks == n && layout.nodes == e.nodes &&
                      layout.nodes_with_several_ranks == e.nodes_with_several_ranks &&
                      layout.min_ranks_per_node == e.min_ranks_per_node &&
                      layout.max_ranks_per_node == e.max_ranks_per_node));
    // One rank per node: hier is the flat ring. Across nodes with a node of several ranks,
    // at 64 MiB hier: with equal nodes the model prices rab's first rounds inside a node and
    // puts it 4% ahead (the simulator at 2 x 2: rab 560 ms, hier 582), less than hier_margin
    // (10%), so hier; with unequal nodes it prices the flat algorithms with a link per rank
    // and takes hier (one host: auto's rule, never hier).
    CHECK(comm.resolve(AllreduceAlgo::kHierarchical, 1 << 20, Compression::kNone) ==
          (e.nodes_with_several_ranks == 0 ? AllreduceAlgo::kRing : AllreduceAlgo::kHierarchical));
    const bool across_with_several = e.nodes > 1 && e.nodes_with_several_ranks > 0;
    const AllreduceAlgo at_64m = comm.resolve(AllreduceAlgo::kAuto, 64 << 20, Compression::kNone);
    CHECK((at_64m == AllreduceAlgo::kHierarchical) == across_with_several);
    for (Compression c : kTransports) {
      for (bool mean : {false, true}) {
        // Growing then shrinking sizes: the shared window is reallocated, then reused.
        for (std::size_t count : kCounts) {
          if (chunk < 100 && count > 5000) continue;  // tens of thousands of messages: slow
          std::vector<float> data(count);
          for (std::size_t i = 0; i < count; ++i) data[i] = exact_bf16_value(r, i);
          comm.allreduce(data, AllreduceAlgo::kHierarchical, mean, c);
          const long bad = first_bf16_mismatch(data, n, 1.0f, mean);
          INFO("transport " << compression_name(c) << " mean " << mean << " count " << count
                            << " rank " << r << " first bad index " << bad);
          REQUIRE(all_ranks(bad < 0 && same_on_all_ranks(comm, data)));
        }
      }
    }
    std::vector<float> data(31, 1.0f);
    comm.allreduce(data, AllreduceAlgo::kHierarchical, false);
    comm.allreduce(std::span<float>(data.data(), 7), AllreduceAlgo::kHierarchical, false);
    bool ok = true;
    for (std::size_t i = 0; i < data.size(); ++i)
      ok = ok && data[i] == static_cast<float>(i < 7 ? n * n : n);
    REQUIRE(all_ranks(ok));
   }
  }
}

TEST_CASE("hier: the network carries the vector once per node, in one ring per slice") {
  const int n = test::world_size();
  const int r = test::world_rank();
  for (const Grouping& g : kGroupings) {
    MpiCommunicator comm(MPI_COMM_WORLD, options_for(g));
    const NodeLayout& layout = comm.layout();
    if (layout.nodes_with_several_ranks == 0 || layout.nodes == 1) continue;  // no hier here
    const std::size_t count = (std::size_t{1} << 18) + 3;
    const int slices = layout.min_ranks_per_node;
    for (Compression c : {Compression::kNone, Compression::kBf16}) {
      // The slices are large enough that each crosses by the ring (not rd), so the byte
      // count is the ring's: 2(M-1) slices per slice owner set, 2(M-1) vectors in all.
      const std::size_t slice_bytes = (count / slices + 1) * sizeof(float);
      REQUIRE(plan_hier_network(slice_bytes, layout.nodes, slices, c, comm.allreduce_tuning().rd_doubling_max_bytes,
                                comm.cost_model())
                  .algo == AllreduceAlgo::kRing);
      const std::uint64_t element = c == Compression::kNone ? 4 : 2;
      const std::uint64_t sent0 = comm.bytes_sent();
      std::vector<float> data(count);
      for (std::size_t i = 0; i < count; ++i) data[i] = exact_bf16_value(r, i);
      comm.allreduce(data, AllreduceAlgo::kHierarchical, false, c);
      double total = static_cast<double>(comm.bytes_sent() - sent0);
      MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      const double expected = static_cast<double>(element) * 2.0 * (layout.nodes - 1) * static_cast<double>(count);
      INFO("block " << g.block << " round robin " << g.round_robin << " transport " << compression_name(c)
                    << " total sent " << total << " expected " << expected << " (flat ring: "
                    << static_cast<double>(element) * 2.0 * (n - 1) * static_cast<double>(count) << ")");
      REQUIRE(all_ranks(total == expected && first_bf16_mismatch(data, n, 1.0f, false) < 0));
    }
  }
}

TEST_CASE("16-bit transports: exact for small integers with every algorithm that has one") {
  const int n = test::world_size();
  const int r = test::world_rank();
  for (std::size_t chunk : {std::size_t{6}, std::size_t{1} << 20}) {
    MpiCommunicatorOptions options;
    options.tuning.ring_chunk_bytes = chunk;
    options.tuning.ring_chunk_bytes_network = chunk;
    options.tuning.ps_chunk_bytes = chunk;
    options.node_group_size = 2;
    MpiCommunicator comm(MPI_COMM_WORLD, options);
    for (AllreduceAlgo algo : {AllreduceAlgo::kRing, AllreduceAlgo::kParameterServer,
                               AllreduceAlgo::kHierarchical, AllreduceAlgo::kRabenseifner,
                               AllreduceAlgo::kAuto}) {
      for (Compression c : {Compression::kBf16, Compression::kFp16}) {
        for (std::size_t count : {std::size_t{1}, static_cast<std::size_t>(n + 1), std::size_t{1001}}) {
          for (bool mean : {false, true}) {
            // Times 2^20: fp16 must scale these down (sums reach 2^25) and back exactly.
            for (float magnitude : {1.0f, 1048576.0f}) {
              std::vector<float> data(count);
              for (std::size_t i = 0; i < count; ++i) data[i] = exact_bf16_value(r, i) * magnitude;
              comm.allreduce(data, algo, mean, c);
              const long bad = first_bf16_mismatch(data, n, magnitude, mean);
              INFO("algo " << allreduce_algo_name(algo) << " transport " << compression_name(c)
                           << " chunk " << chunk << " count " << count << " mean " << mean
                           << " magnitude " << magnitude << " first bad " << bad);
              REQUIRE(all_ranks(bad < 0));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("16-bit transports stay within the stated error bound and never overflow") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int n = comm.size();
  const int r = comm.rank();
  const std::size_t count = 20011;
  // Per-element bound on |result - exact sum|: each of at most N roundings of a partial
  // sum (bounded by sum |x|) costs at most half an ulp, 2^-8 (bf16, 8 significant bits)
  // or 2^-11 (fp16, 11 bits) of it; fp16's scale keeps these magnitudes out of its
  // subnormal range.
  for (Compression c : {Compression::kBf16, Compression::kFp16}) {
    const double unit = c == Compression::kBf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    for (double magnitude : {1e-3, 1.0, 1e5, 1e30}) {
      for (AllreduceAlgo algo : {AllreduceAlgo::kRing, AllreduceAlgo::kParameterServer}) {
        std::vector<float> data(count);
        std::vector<double> exact(count, 0.0), abs_sum(count, 0.0);
        for (std::size_t i = 0; i < count; ++i) {
          for (int q = 0; q < n; ++q) {
            const double x = magnitude * std::sin(0.37 * static_cast<double>(i) + 1.3 * q);
            const float xf = static_cast<float>(x);
            exact[i] += xf;
            abs_sum[i] += std::fabs(xf);
            if (q == r) data[i] = xf;
          }
        }
        comm.allreduce(data, algo, false, c);
        bool ok = same_on_all_ranks(comm, data);
        double worst = 0.0;
        for (std::size_t i = 0; i < count; ++i) {
          const double error = std::fabs(static_cast<double>(data[i]) - exact[i]);
          const double bound = (n + 1) * unit * abs_sum[i] + 1e-6 * std::fabs(exact[i]);
          ok = ok && std::isfinite(data[i]) && error <= bound;
          if (abs_sum[i] > 0) worst = std::max(worst, error / abs_sum[i]);
        }
        INFO("transport " << compression_name(c) << " algo " << allreduce_algo_name(algo)
                          << " magnitude " << magnitude << " worst error / sum|x| " << worst);
        REQUIRE(all_ranks(ok));
      }
    }
  }
}

TEST_CASE("fp16 transport passes inf and NaN through like fp32 and scales around them") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int n = comm.size();
  std::vector<float> data(64, 2.0f);
  if (comm.rank() == 0) {
    data[3] = std::numeric_limits<float>::infinity();
    data[5] = std::numeric_limits<float>::quiet_NaN();
  }
  comm.allreduce(data, AllreduceAlgo::kRing, false, Compression::kFp16);
  bool ok = std::isinf(data[3]) && data[3] > 0 && std::isnan(data[5]);
  for (std::size_t i = 0; i < data.size(); ++i)
    if (i != 3 && i != 5) ok = ok && data[i] == 2.0f * n;
  REQUIRE(all_ranks(ok));
}

TEST_CASE("every algorithm and transport leaves bit-identical results on every rank") {
  for (const Grouping& g : kGroupings) {
    MpiCommunicator comm(MPI_COMM_WORLD, options_for(g));
    // The other algorithms do not look at the grouping beyond the node order: blocks of 1
    // and 2 and the real split are enough for them; hier runs under every grouping.
    const bool hier_only = g.block == 3 || g.round_robin > 0;
    const int group = g.block;
    for (AllreduceAlgo algo : {AllreduceAlgo::kRing, AllreduceAlgo::kHierarchical,
                               AllreduceAlgo::kMpi, AllreduceAlgo::kParameterServer,
                               AllreduceAlgo::kRecursiveDoubling, AllreduceAlgo::kRabenseifner,
                               AllreduceAlgo::kAuto}) {
      for (Compression c : kTransports) {
        const bool fp32_only =
            algo == AllreduceAlgo::kMpi || algo == AllreduceAlgo::kRecursiveDoubling;
        if (fp32_only && c != Compression::kNone) continue;
        if (hier_only && algo != AllreduceAlgo::kHierarchical) continue;
        for (std::size_t count : {std::size_t{4099}, std::size_t{300007}}) {
          // Non-integer values: rounding depends on the order of summation and on each
          // hop's 16-bit rounding, yet every rank must agree.
          std::vector<float> data(count);
          for (std::size_t i = 0; i < count; ++i)
            data[i] = 0.1f * static_cast<float>(comm.rank() + 1) + 1e-3f * static_cast<float>(i % 977);
          comm.allreduce(data, algo, true, c);
          INFO("group " << group << " round robin " << g.round_robin << " algo " << allreduce_algo_name(algo) << " transport "
                        << compression_name(c) << " count " << count);
          REQUIRE(all_ranks(same_on_all_ranks(comm, data)));
        }
      }
    }
  }
}

TEST_CASE("rd and mpi refuse 16-bit transport on every rank, naming the choices") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  if (comm.size() == 1) return;  // one rank returns before any algorithm runs
  for (AllreduceAlgo algo : {AllreduceAlgo::kRecursiveDoubling, AllreduceAlgo::kMpi}) {
    std::vector<float> data(10, 1.0f);
    std::string message;
    try {
      comm.allreduce(data, algo, false, Compression::kBf16);
    } catch (const std::invalid_argument& e) {
      message = e.what();
    }
    INFO(message);
    REQUIRE(all_ranks(message.find("fp32 only") != std::string::npos &&
                      message.find("ring, hier, ps, rab or auto") != std::string::npos &&
                      data == std::vector<float>(10, 1.0f)));
  }
}

TEST_CASE("16-bit ring moves two bytes per element of the ring's traffic") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int n = comm.size();
  const std::size_t count = 100003;
  for (Compression c : {Compression::kBf16, Compression::kFp16}) {
    const std::uint64_t sent0 = comm.bytes_sent();
    const std::uint64_t received0 = comm.bytes_received();
    std::vector<float> data(count, 1.0f);
    comm.allreduce(data, AllreduceAlgo::kRing, false, c);
    // fp16 also agrees on its scale: one float each way through MPI_Allreduce.
    const std::uint64_t extra = c == Compression::kFp16 && n > 1 ? 4 : 0;
    REQUIRE(all_ranks(
        comm.bytes_sent() - sent0 == 2 * ring_elements_sent(count, n, comm.rank()) + extra &&
        comm.bytes_received() - received0 ==
            2 * ring_elements_received(count, n, comm.rank()) + extra));
  }
}
