// DistributedSampler: disjoint, complete (train: up to the dropped remainder) shards,
// equal step counts, shared per-epoch permutation, resume, and exact eval coverage.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <set>

#include "datasets/DistributedSampler.h"

using namespace ringtrain;
using Mode = DistributedSampler::Mode;

namespace {

std::vector<std::size_t> to_vector(std::span<const std::size_t> s) { return {s.begin(), s.end()}; }

}  // namespace

TEST_CASE("train shards are disjoint, equal-sized and drop only the remainder", "[sampler]") {
  for (int world = 1; world <= 5; ++world) {
    for (std::size_t n : {1, 7, 13, 101, 1000}) {
      for (std::uint64_t epoch : {0, 3}) {
        std::multiset<std::size_t> all;
        std::set<std::size_t> steps;
        for (int r = 0; r < world; ++r) {
          DistributedSampler s(n, r, world, 1234, Mode::kTrain);
          s.set_epoch(epoch);
          REQUIRE(s.indices().size() == n / world);
          all.insert(s.indices().begin(), s.indices().end());
          steps.insert(s.steps(4));
          CHECK(s.steps(4) == (n / world) / 4);
        }
        INFO("world " << world << " n " << n);
        CHECK(all.size() == (n / world) * world);
        CHECK(std::set<std::size_t>(all.begin(), all.end()).size() == all.size());  // disjoint
        CHECK(std::all_of(all.begin(), all.end(), [&](std::size_t i) { return i < n; }));
        CHECK(steps.size() == 1);  // every rank takes the same number of steps
      }
    }
  }
}

TEST_CASE("all ranks share one permutation per epoch; it changes with the epoch and seed", "[sampler]") {
  const std::size_t n = 110;
  const int world = 3;
  // Rank-strided: rank r's k-th index is position r + k*world of the shared permutation,
  // so interleaving the shards recovers one permutation of the first floor(n/3)*3 positions.
  auto interleaved = [&](std::uint64_t seed, std::uint64_t epoch) {
    std::vector<std::vector<std::size_t>> shards;
    for (int r = 0; r < world; ++r) {
      DistributedSampler s(n, r, world, seed, Mode::kTrain);
      s.set_epoch(epoch);
      shards.push_back(to_vector(s.indices()));
    }
    std::vector<std::size_t> order;
    for (std::size_t k = 0; k < n / world; ++k)
      for (int r = 0; r < world; ++r) order.push_back(shards[r][k]);
    return order;
  };
  // One rank alone (world 1) sees the full permutation; the ranks' interleaving is its prefix.
  DistributedSampler single(n, 0, 1, 5, Mode::kTrain);
  single.set_epoch(2);
  const auto full = to_vector(single.indices());
  const auto inter = interleaved(5, 2);
  CHECK(std::equal(inter.begin(), inter.end(), full.begin()));
  auto sorted = full;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::size_t> iota(n);
  std::iota(iota.begin(), iota.end(), 0);
  CHECK(sorted == iota);  // a permutation
  CHECK(full != iota);    // actually shuffled

  CHECK(interleaved(5, 2) == interleaved(5, 2));
  CHECK(interleaved(5, 2) != interleaved(5, 3));
  CHECK(interleaved(5, 2) != interleaved(6, 2));
}

TEST_CASE("batch s of all ranks together equals batch s of one rank with world x batch", "[sampler]") {
  const std::size_t n = 97, batch = 4;
  const int world = 3;
  DistributedSampler single(n, 0, 1, 9, Mode::kTrain);
  single.set_epoch(1);
  std::vector<DistributedSampler> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back(n, r, world, 9, Mode::kTrain);
    ranks.back().set_epoch(1);
  }
  REQUIRE(ranks[0].steps(batch) == (n / world) / batch);
  for (std::size_t step = 0; step < ranks[0].steps(batch); ++step) {
    std::set<std::size_t> together;
    for (auto& s : ranks)
      for (auto i : s.batch(step, batch)) together.insert(i);
    const auto big = single.batch(step, batch * world);
    CHECK(together == std::set<std::size_t>(big.begin(), big.end()));
  }
}

TEST_CASE("resuming at (epoch, step) yields the same remaining sequence", "[sampler]") {
  const std::size_t n = 1000, batch = 16;
  DistributedSampler first(n, 1, 3, 77, Mode::kTrain);
  std::vector<std::size_t> expected;
  first.set_epoch(0);
  first.set_epoch(4);
  for (std::size_t step = 5; step < first.steps(batch); ++step) {
    const auto b = first.batch(step, batch);
    REQUIRE(b.size() == batch);
    expected.insert(expected.end(), b.begin(), b.end());
  }
  DistributedSampler resumed(n, 1, 3, 77, Mode::kTrain);  // a fresh process
  resumed.set_epoch(4);
  std::vector<std::size_t> got;
  for (std::size_t step = 5; step < resumed.steps(batch); ++step) {
    const auto b = resumed.batch(step, batch);
    got.insert(got.end(), b.begin(), b.end());
  }
  CHECK(got == expected);
  CHECK_THROWS_AS(resumed.batch(resumed.steps(batch), batch), std::out_of_range);
}

TEST_CASE("eval covers every index exactly once, in order, shards differ by at most one", "[sampler]") {
  for (int world = 1; world <= 5; ++world) {
    for (std::size_t n : {1, 2, 7, 13, 101}) {
      std::vector<int> hits(n, 0);
      std::size_t lo = n, hi = 0;
      for (int r = 0; r < world; ++r) {
        DistributedSampler s(n, r, world, 1, Mode::kEval);
        s.set_epoch(5);  // no shuffle in eval, whatever the epoch
        const auto idx = s.indices();
        CHECK(std::is_sorted(idx.begin(), idx.end()));
        lo = std::min(lo, idx.size());
        hi = std::max(hi, idx.size());
        CHECK(s.steps(3) == (idx.size() + 2) / 3);
        std::size_t batched = 0;
        for (std::size_t step = 0; step < s.steps(3); ++step)
          for (auto i : s.batch(step, 3)) {
            ++hits[i];
            ++batched;
          }
        CHECK(batched == idx.size());
      }
      INFO("world " << world << " n " << n);
      CHECK(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
      CHECK(hi - lo <= 1);
    }
  }
}

TEST_CASE("sampler argument errors", "[sampler]") {
  CHECK_THROWS_AS(DistributedSampler(10, 2, 2, 0, Mode::kTrain), std::invalid_argument);
  CHECK_THROWS_AS(DistributedSampler(10, -1, 2, 0, Mode::kTrain), std::invalid_argument);
  CHECK_THROWS_AS(DistributedSampler(10, 0, 0, 0, Mode::kTrain), std::invalid_argument);
  DistributedSampler s(10, 0, 2, 0, Mode::kTrain);
  CHECK_THROWS_AS(s.steps(0), std::invalid_argument);
}

TEST_CASE("block shuffle: every sample at most once, contiguous equal shares, whole blocks read together", "[sampler]") {
  const std::size_t n = 110;
  BlockShuffle blocks;
  for (std::size_t s = 0; s < n; s += 10) blocks.starts.push_back(s);  // 11 blocks of 10
  blocks.window_blocks = 2;
  for (int world = 1; world <= 4; ++world) {
    std::multiset<std::size_t> all;
    std::vector<std::size_t> order;
    for (int r = 0; r < world; ++r) {
      DistributedSampler s(n, r, world, 99, Mode::kTrain);
      s.set_blocks(blocks);
      s.set_epoch(2);
      REQUIRE(s.indices().size() == n / world);
      all.insert(s.indices().begin(), s.indices().end());
      order.insert(order.end(), s.indices().begin(), s.indices().end());
    }
    INFO("world " << world);
    CHECK(all.size() == (n / world) * world);
    CHECK(std::set<std::size_t>(all.begin(), all.end()).size() == all.size());
    // Each window of two blocks' samples is contiguous in the order: the first 20
    // positions come from exactly two blocks.
    std::set<std::size_t> first_blocks;
    for (std::size_t k = 0; k < 20 && k < order.size(); ++k) first_blocks.insert(order[k] / 10);
    CHECK(first_blocks.size() <= 2);
  }
  // A new epoch, a new order; the same epoch, the same order on every call.
  DistributedSampler a(n, 0, 1, 99, Mode::kTrain), b(n, 0, 1, 99, Mode::kTrain);
  a.set_blocks(blocks);
  b.set_blocks(blocks);
  a.set_epoch(1);
  b.set_epoch(1);
  CHECK(to_vector(a.indices()) == to_vector(b.indices()));
  b.set_epoch(2);
  CHECK(to_vector(a.indices()) != to_vector(b.indices()));
  BlockShuffle bad;
  bad.starts = {1, 5};
  CHECK_THROWS_AS(a.set_blocks(bad), std::invalid_argument);
}
