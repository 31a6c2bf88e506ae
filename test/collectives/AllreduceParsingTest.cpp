// Algorithm and compression names, size parsing, the even partition and auto's choice.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "collectives/AllreduceCostModel.h"
#include "collectives/CostModelFile.h"
#include "collectives/AllreduceTuning.h"
#include "collectives/BenchRunner.h"
#include "collectives/EvenPartition.h"
#include "collectives/RingAllreduce.h"

using namespace ringtrain;

TEST_CASE("allreduce algorithm names round-trip and bad names throw") {
  for (const char* name : {"ring", "hier", "mpi", "ps", "rd", "rab", "auto"}) {
    CHECK(allreduce_algo_name(parse_allreduce_algo(name)) == name);
  }
  CHECK(parse_allreduce_algo("hier") == AllreduceAlgo::kHierarchical);
  CHECK_THROWS_AS(allreduce_algo_name(static_cast<AllreduceAlgo>(42)), std::invalid_argument);
  CHECK(parse_allreduce_algo("ps") == AllreduceAlgo::kParameterServer);
  CHECK(parse_allreduce_algo("rd") == AllreduceAlgo::kRecursiveDoubling);
  CHECK(parse_allreduce_algo("rab") == AllreduceAlgo::kRabenseifner);
  CHECK_THROWS_AS(parse_allreduce_algo("Ring"), std::invalid_argument);
  CHECK_THROWS_AS(parse_allreduce_algo(""), std::invalid_argument);
  CHECK_THROWS_AS(parse_allreduce_algo("all"), std::invalid_argument);
}

TEST_CASE("compression names round-trip and bad names throw with the expected list") {
  for (const char* name : {"none", "bf16", "fp16"}) {
    CHECK(compression_name(parse_compression(name)) == name);
  }
  CHECK(parse_compression("bf16") == Compression::kBf16);
  CHECK(parse_compression("fp16") == Compression::kFp16);
  for (const char* bad : {"", "BF16", "fp32", "half"}) {
    try {
      parse_compression(bad);
      FAIL("no exception for '" << bad << "'");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("none, bf16 or fp16") != std::string::npos);
    }
  }
  CHECK_THROWS_AS(compression_name(static_cast<Compression>(7)), std::invalid_argument);
  CHECK(parse_compression_list("none,bf16") ==
        std::vector<Compression>{Compression::kNone, Compression::kBf16});
  CHECK_THROWS_AS(parse_compression_list("none,,bf16"), std::invalid_argument);
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
  CHECK(stepped_sizes(4, 64) == std::vector<std::size_t>{4, 8, 16, 32, 64});
  CHECK(stepped_sizes(4, 63) == std::vector<std::size_t>{4, 8, 16, 32});
  CHECK_THROWS_AS(stepped_sizes(64, 4), std::invalid_argument);
  CHECK_THROWS_AS(stepped_sizes(0, 4), std::invalid_argument);
  CHECK(stepped_sizes(4, 256, 4) == std::vector<std::size_t>{4, 16, 64, 256});
  CHECK(stepped_sizes(4, 100, 3) == std::vector<std::size_t>{4, 12, 36});
  CHECK_THROWS_AS(stepped_sizes(4, 64, 1), std::invalid_argument);
}

TEST_CASE("algorithm lists: all is mpi first, then the hand-written ones") {
  const auto all = parse_algo_list("all");
  REQUIRE(all.size() == 7);
  CHECK(all.front() == AllreduceAlgo::kMpi);
  CHECK(std::find(all.begin(), all.end(), AllreduceAlgo::kHierarchical) != all.end());
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
        CHECK(ring_elements_sent(count, n, r) == sent);
        CHECK(ring_elements_received(count, n, r) == received);
      }
    }
  }
}

TEST_CASE("auto's rules where the model does not apply (one rank, one host), and hier by the model") {
  AllreduceTuning tuning;
  tuning.auto_ring_min_bytes_single_host = 5000;
  const AllreduceCostModel model;
  const Compression none = Compression::kNone;
  const auto algo = [&](std::size_t bytes, NodeLayout layout, Compression c) {
    return plan_auto_allreduce(bytes, layout, c, tuning, model).algo;
  };
  const NodeLayout one_host{4, 1, 1};  // all ranks on one node
  CHECK(algo(4999, one_host, none) == AllreduceAlgo::kRecursiveDoubling);
  CHECK(algo(5000, one_host, none) == AllreduceAlgo::kRing);
  CHECK(plan_auto_allreduce(10, one_host, none, tuning, model).predicted_s.empty());
  CHECK(AllreduceTuning{}.auto_ring_min_bytes_single_host == 4 * 1024 * 1024);
  CHECK(algo(std::size_t{1} << 26, NodeLayout{2, 1, 1}, none) == AllreduceAlgo::kRing);
  // Several ranks on a node across nodes: the model, with hier among the candidates (its
  // prediction last). 2 nodes x 2 ranks, as the simulator replays them (allreduce_sim --np 4
  // --ranks-per-node 2 --sizes 4,64M: rd 52 us, hier 56, rab 104, ring 156 at 4 B; rab 560 ms,
  // hier 582, ring 811 at 64 MiB): rd's whole-vector doubling at 4 B (its first round stays
  // in the node, one network latency); at 64 MiB hier: rab leads it by less than hier_margin
  // (10%; measured at 4x2 and 2x4, rab was the slower one where the model had it ahead).
  const NodeLayout two_by_two{4, 2, 2, 2, 2};
  for (std::size_t bytes : {std::size_t{4}, std::size_t{1} << 26}) {
    const AllreducePlan plan = plan_auto_allreduce(bytes, two_by_two, none, tuning, model);
    CHECK(plan.basis == "cost model");
    CHECK(plan.predicted_s.back().first == AllreduceAlgo::kHierarchical);
    CHECK(plan.algo == (bytes == 4 ? AllreduceAlgo::kRecursiveDoubling : AllreduceAlgo::kHierarchical));
  }
  // 16-bit transport (no rd; the simulator with --compress bf16: rab 104 us, hier 106, ring
  // 156 at 4 B; rab 280 ms, hier 311, ring 406 at 64 MiB): hier at 4 B (within 10% of rab),
  // rab at 64 MiB (more than 10% ahead).
  CHECK(algo(4, two_by_two, Compression::kBf16) == AllreduceAlgo::kHierarchical);
  CHECK(algo(std::size_t{1} << 26, two_by_two, Compression::kBf16) == AllreduceAlgo::kRabenseifner);
  // Unequal nodes (two ranks and one): the flat algorithms predicted as one rank per link,
  // hier with its one slice; hier at both sizes.
  for (std::size_t bytes : {std::size_t{4}, std::size_t{1} << 26}) {
    const AllreducePlan plan = plan_auto_allreduce(bytes, NodeLayout{3, 2, 1, 1, 2}, none, tuning, model);
    CHECK(plan.predicted_s.back().first == AllreduceAlgo::kHierarchical);
    CHECK(plan.algo == AllreduceAlgo::kHierarchical);
  }
  // One rank per node: no hier candidate.
  CHECK(plan_auto_allreduce(1 << 26, NodeLayout{4, 4, 0}, none, tuning, model).predicted_s.size() == 3);
  // rd has no 16-bit transport: on one host with compression the ring at small sizes too.
  CHECK(algo(10, one_host, Compression::kFp16) == AllreduceAlgo::kRing);
  CHECK(algo(10, NodeLayout{1, 1, 0}, none) == AllreduceAlgo::kRing);
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

TEST_CASE("cost model: ring and rab by their formulas; rab pays log2 p rounds, the ring p-1") {
  AllreduceCostModel m;
  m.alpha_s = 10e-6;
  m.beta_s_per_byte = 1e-9;
  m.gamma_s_per_byte = 0.0;
  const auto none = Compression::kNone;
  const std::size_t mib = 1 << 20;
  const double chunk = 65408;  // ModelLayout's default pipeline chunk
  // p = 2: one exchange of n/2 each way and back. rab pays a latency per round; the ring's
  // segments are 8 chunks, so each step's latency hides behind the chunks on the link.
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRing, mib, 2, none, 2048, m) == Approx(mib * 1e-9));
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRabenseifner, mib, 2, none, 2048, m) ==
        Approx(2 * 10e-6 + mib * 1e-9));
  // p = 8, 1 MiB: the same 2 (7/8) n bytes; rab 6 rounds of latency, the ring's 14 hidden
  // (its chain, 14 (alpha + chunk beta) = 1.06 ms, is shorter than the link's 1.84 ms).
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRing, mib, 8, none, 2048, m) == Approx(1.75 * mib * 1e-9));
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRabenseifner, mib, 8, none, 2048, m) ==
        Approx(6 * 10e-6 + 1.75 * mib * 1e-9));
  // Segments of one chunk (64 KiB / 8): every step waits for its message: the chain,
  // 14 (alpha + n/8 beta) + 7 (n/8) gamma.
  m.gamma_s_per_byte = 0.5e-9;
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRing, 65536, 8, none, 2048, m) ==
        Approx(14 * (10e-6 + 8192 * 1e-9) + 7 * 8192 * 0.5e-9));
  // Many chunks: the link (7 steps of two segments) against the chain (14 chunk hops and
  // 7 chunk additions): the link, 1.75 n beta.
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRing, mib, 8, none, 2048, m) == Approx(1.75 * mib * 1e-9));
  // Additions slower than the link: a reduce-scatter step costs s gamma, an all-gather s beta.
  m.gamma_s_per_byte = 2e-9;
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRing, 64 * mib, 8, none, 2048, m) ==
        Approx(7 * (8 * mib * 2e-9 + 8 * mib * 1e-9)));
  // rab's additions overlap its receives: a reduce-scatter round of s costs
  // alpha + max(s beta + chunk gamma, chunk beta + s gamma).
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRabenseifner, mib, 2, none, 2048, m) ==
        Approx(2 * 10e-6 + chunk * 1e-9 + (mib / 2) * 2e-9 + (mib / 2) * 1e-9));
  m.gamma_s_per_byte = 0.0;
  // 16-bit halves the wire; p = 3 folds one rank in (2 alpha + 2 w beta) and runs q = 2.
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRabenseifner, mib, 3, Compression::kBf16, 2048, m) ==
        Approx(2 * 10e-6 + 0.5 * mib * 1e-9 + 2 * (10e-6 + 0.5 * mib * 1e-9)));
  // rd: whole-vector doubling up to doubling_max_bytes, log2 q rounds of n.
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRecursiveDoubling, 1024, 4, none, 2048, m) ==
        Approx(2 * (10e-6 + 1024 * 1e-9)));
  // rd above it: halving-doubling in whole messages of n/2, n/4 each way; those above the
  // eager limit (64 KiB) go by rendezvous: the rendezvous rate and two more latencies each
  // (request to send, clear to send).
  m.rendezvous_beta_s_per_byte = 3e-9;
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRecursiveDoubling, mib, 4, none, 2048, m) ==
        Approx(4 * 3 * 10e-6 + 2 * (mib / 2 + mib / 4) * 3e-9));
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRecursiveDoubling, 65536, 4, none, 2048, m) ==
        Approx(4 * 10e-6 + 2 * (32768 + 16384) * 1e-9));
  // p = 3: the fold sends the whole vector down and back, then q = 2.
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRecursiveDoubling, mib, 3, none, 2048, m) ==
        Approx(2 * (3 * 10e-6 + mib * 3e-9) + 2 * (3 * 10e-6 + mib / 2 * 3e-9)));
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRing, mib, 1, none, 2048, m) == 0.0);
  CHECK_THROWS_AS(predict_allreduce_seconds(AllreduceAlgo::kHierarchical, mib, 4, none, 2048, m),
                  std::invalid_argument);
  CHECK_THROWS_AS(predict_allreduce_seconds(AllreduceAlgo::kRing, mib, 4, none, 2048, m, ModelLayout{0, 1}),
                  std::invalid_argument);
}

TEST_CASE("cost model with several ranks per node: memory inside a node, a shared link across") {
  AllreduceCostModel m;
  m.alpha_s = 10e-6;
  m.shm_alpha_s = 2e-6;
  m.beta_s_per_byte = 1e-9;
  m.copy_s_per_byte = 0.25e-9;
  m.gamma_s_per_byte = 0.0;
  const auto none = Compression::kNone;
  const std::size_t mib = 1 << 20;
  const ModelLayout four_per_node{4};
  // rab, 2 nodes x 4 ranks, 1 MiB: the n/2 and n/4 rounds stay in the node (memory), the
  // n/8 round crosses with the node's 4 ranks on its link: the first such round waits for
  // all four (n/2 beta), the all-gather's is link-bound too (4 x n/8 beta > alpha + n/8 beta).
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRabenseifner, mib, 8, none, 2048, m, four_per_node) ==
        Approx(4 * 2e-6 + 2 * 0.75 * mib * 0.25e-9 + 10e-6 + mib * 1e-9));
  // One link per rank (the default layout): 6 network rounds and 1.75 n each way.
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRabenseifner, mib, 8, none, 2048, m) ==
        Approx(6 * 10e-6 + 1.75 * mib * 1e-9));
  // The ring, node by node, 64 KiB with alpha 50 us: a chunk's chain crosses
  // ceil(14 / 4) = 4 links and 10 memory paths (against 14 links with a link per rank).
  m.alpha_s = 50e-6;
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRing, 65536, 8, none, 2048, m, four_per_node) ==
        Approx(4 * (50e-6 + 8192 * 1e-9) + 10 * (2e-6 + 8192 * 0.25e-9)));
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRing, 65536, 8, none, 2048, m) ==
        Approx(14 * (50e-6 + 8192 * 1e-9)));
  // Memory slower than the link: the ring's steps are paced by the memory path.
  m.copy_s_per_byte = 4e-9;
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRing, 64 * mib, 8, none, 2048, m, four_per_node) ==
        Approx(14 * 8 * mib * 4e-9));
  // rd, 2 nodes x 4, 1 MiB: its first (farthest) round crosses with 4 flows on the link, by
  // rendezvous (3 alpha + n/2 x 4 rendezvous beta); the other rounds stay in the node.
  m.copy_s_per_byte = 0.25e-9;
  m.rendezvous_beta_s_per_byte = 3e-9;
  CHECK(predict_allreduce_seconds(AllreduceAlgo::kRecursiveDoubling, mib, 8, none, 2048, m, four_per_node) ==
        Approx(2 * (3 * 50e-6 + mib / 2 * 4 * 3e-9) + 2 * (2e-6 + mib / 4 * 0.25e-9) +
               2 * (2e-6 + mib / 8 * 0.25e-9)));
}

TEST_CASE("cost model: hier is its copies, the owners' additions and a network phase on a shared link") {
  AllreduceCostModel m;
  m.alpha_s = 10e-6;
  m.beta_s_per_byte = 1e-9;
  m.rendezvous_beta_s_per_byte = 3e-9;
  m.copy_s_per_byte = 0.25e-9;
  m.gamma_s_per_byte = 0.5e-9;
  const auto none = Compression::kNone;
  const std::size_t mib = 1 << 20;
  // 2 nodes x 4 ranks: 4 slices of n/4, each a ring of 2 ranks on a link shared 4 ways
  // (link-bound: (n/4)(4 beta)), plus copying in and out (2 n copy) and the owner's
  // 3 additions of its slice (3 (n/4) gamma).
  CHECK(predict_hier_seconds(mib, 2, 4, 4, none, 2048, m) ==
        Approx(mib * 1e-9 + 2 * mib * 0.25e-9 + 3 * (mib / 4) * 0.5e-9));
  CHECK(plan_hier_network(mib / 4, 2, 4, none, 2048, m).algo == AllreduceAlgo::kRing);
  // Unequal nodes (3 and 1 ranks): one slice, the whole vector across 2 nodes.
  CHECK(predict_hier_seconds(mib, 2, 1, 3, none, 2048, m) ==
        Approx(mib * 1e-9 + 2 * mib * 0.25e-9 + 2 * mib * 0.5e-9));
  // One node: no network phase, only the copies and additions.
  CHECK(predict_hier_seconds(mib, 1, 2, 2, none, 2048, m) == Approx(2 * mib * 0.25e-9 + (mib / 2) * 0.5e-9));
  CHECK_THROWS_AS(predict_hier_seconds(mib, 2, 3, 2, none, 2048, m), std::invalid_argument);
  CHECK_THROWS_AS(predict_allreduce_seconds(AllreduceAlgo::kRecursiveDoubling, mib, 4,
                                            Compression::kBf16, 2048, m),
                  std::invalid_argument);
}

TEST_CASE("predict_bench_rows: the modelled rows with their transport, error against avg") {
  AllreduceCostModel m;
  m.alpha_s = 0.0;
  m.beta_s_per_byte = 1e-9;
  m.gamma_s_per_byte = 0.0;
  std::vector<BenchRow> rows(4);
  rows[0].algo = "mpi";
  rows[1].algo = "ring";
  rows[2].algo = "rab/bf16";
  rows[3].algo = "ps";
  for (auto& r : rows) {
    r.bytes = 1000000;
    r.time_avg_us = 800.0;
  }
  const auto p = predict_bench_rows(rows, 2, 2048, m);
  REQUIRE(p.size() == 2);
  CHECK(p[0].algo == "ring");
  CHECK(p[0].predicted_us == Approx(1000.0));  // p = 2: n beta
  CHECK(p[0].error == Approx(0.25));
  CHECK(p[1].algo == "rab/bf16");
  CHECK(p[1].predicted_us == Approx(500.0));  // half the wire
  CHECK(p[1].measured_us == 800.0);
}

TEST_CASE("tuning file: written and read back; bad lines name the file and line") {
  const std::string path = "cost_model_test.tuning";
  AllreduceCostModel m;
  m.alpha_s = 2.5e-5;
  m.beta_s_per_byte = 8.06e-9;
  m.gamma_s_per_byte = 1.25e-10;
  m.rendezvous_beta_s_per_byte = 1.5e-8;
  m.copy_s_per_byte = 3e-10;
  m.eager_limit_bytes = 4096;
  m.choice_margin = 0.1;
  m.hier_margin = 0.2;
  m.lanes_margin = 0.3;
  write_cost_model(m, path, "test");
  const AllreduceCostModel back = read_cost_model(path);
  CHECK(back.alpha_s == Approx(m.alpha_s));
  CHECK(back.beta_s_per_byte == Approx(m.beta_s_per_byte));
  CHECK(back.gamma_s_per_byte == Approx(m.gamma_s_per_byte));
  CHECK(back.rendezvous_beta_s_per_byte == Approx(m.rendezvous_beta_s_per_byte));
  CHECK(back.copy_s_per_byte == Approx(m.copy_s_per_byte));
  CHECK(back.eager_limit_bytes == m.eager_limit_bytes);
  CHECK(back.choice_margin == Approx(m.choice_margin));
  CHECK(back.hier_margin == Approx(m.hier_margin));
  CHECK(back.lanes_margin == Approx(m.lanes_margin));
  CHECK(cost_model_text(back) == cost_model_text(m));
  const auto fails_with = [&](const std::string& text, const std::string& words) {
    {
      std::ofstream out(path);
      out << text;
    }
    try {
      read_cost_model(path);
    } catch (const std::runtime_error& e) {
      return std::string(e.what()).find(words) != std::string::npos;
    }
    return false;
  };
  CHECK(fails_with("# c\nalpha_s = 1e-5\nbeta = 3\n", path + ":3: unknown key 'beta'"));
  CHECK(fails_with("alpha_s 1e-5\n", path + ":1: expected key = value"));
  CHECK(fails_with("gamma_s_per_byte = -1\n", "gamma_s_per_byte must be a finite number >= 0"));
  CHECK(fails_with("alpha_s = 1e-5x\n", "alpha_s must be"));
  {
    std::ofstream out(path);
    out << "  # only alpha\nalpha_s = 3e-6  # comment\n";
  }
  CHECK(read_cost_model(path).alpha_s == Approx(3e-6));
  CHECK(read_cost_model(path).beta_s_per_byte == AllreduceCostModel{}.beta_s_per_byte);
  std::remove(path.c_str());
  CHECK_THROWS_AS(read_cost_model(path), std::runtime_error);
}
