// ExactShardSum on one rank: the int64 fixed-point mean of S shards is the exact mean to
// fp32 precision, does not depend on which shard holds which gradient (a float sum does),
// survives the extremes of fp32's range without overflow, and refuses a non-finite gradient.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "collectives/SelfCommunicator.h"
#include "common/CollectiveError.h"
#include "common/Random.h"
#include "overlap/ExactShardSum.h"

using namespace ringtrain;

namespace {

using Buckets = std::vector<std::pair<std::size_t, std::size_t>>;

// The mean of shards[order[0]], shards[order[1]], ... as ExactShardSum computes it.
std::vector<float> exact_mean(const std::vector<std::vector<float>>& shards, const std::vector<int>& order,
                              const Buckets& buckets) {
  SelfCommunicator self;
  const std::size_t n = shards[0].size();
  ExactShardSum sum(self, buckets, n, 0, static_cast<int>(shards.size()));
  sum.begin();
  for (std::size_t i = 0; i < order.size(); ++i) sum.add(static_cast<int>(i), shards[order[i]], {});
  std::vector<float> out(n);
  sum.reduce(out, {});
  return out;
}

std::vector<std::vector<float>> random_shards(int shards, std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::vector<float>> out(static_cast<std::size_t>(shards), std::vector<float>(n));
  for (auto& s : out) {
    // Magnitudes over 12 decades, both signs: where float sums are most order-dependent.
    for (float& v : s) v = rng.uniform(-1.0f, 1.0f) * std::pow(10.0f, rng.uniform(-8.0f, 4.0f));
  }
  return out;
}

}  // namespace

TEST_CASE("The exact mean equals the long-double mean to fp32 rounding") {
  const auto shards = random_shards(12, 1000, 1);
  const Buckets buckets = {{0, 300}, {300, 700}};
  const auto mean = exact_mean(shards, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, buckets);
  for (std::size_t j = 0; j < mean.size(); ++j) {
    long double ref = 0.0L;
    for (const auto& s : shards) ref += s[j];
    ref /= 12.0L;
    // Quantisation: half a step of 2^-47 of the bucket's max (< 10^4 here; 51 - ceil(log2 12)
    // bits), then fp32 rounding of the result.
    const long double tolerance = std::fabs(ref) * 0x1p-23L + 1e4L * 0x1p-47L;
    INFO("element " << j << ": " << mean[j] << " vs " << static_cast<double>(ref));
    REQUIRE(std::fabs(static_cast<long double>(mean[j]) - ref) <= tolerance);
  }
}

TEST_CASE("The exact mean does not depend on which shard holds which gradient; a float sum does") {
  const auto shards = random_shards(12, 4000, 2);
  const Buckets buckets = {{0, 4000}};
  const auto a = exact_mean(shards, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, buckets);
  const auto b = exact_mean(shards, {11, 5, 3, 7, 0, 9, 1, 10, 2, 8, 4, 6}, buckets);
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  // The same two orders summed in float: at least one element differs, or this test shows nothing.
  std::size_t differ = 0;
  for (std::size_t j = 0; j < a.size(); ++j) {
    float x = 0.0f, y = 0.0f;
    for (int k : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}) x += shards[static_cast<std::size_t>(k)][j];
    for (int k : {11, 5, 3, 7, 0, 9, 1, 10, 2, 8, 4, 6}) y += shards[static_cast<std::size_t>(k)][j];
    differ += x != y ? 1 : 0;
  }
  CHECK(differ > 0);
}

TEST_CASE("fp32's extremes: no overflow at FLT_MAX, zeros stay zeros, denormals do not break the scale") {
  std::vector<std::vector<float>> shards(12, std::vector<float>{FLT_MAX, -FLT_MAX, 0.0f, -0.0f, 1e-44f});
  const auto mean = exact_mean(shards, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {{0, 2}, {2, 3}});
  CHECK(mean[0] == FLT_MAX);
  CHECK(mean[1] == -FLT_MAX);
  CHECK(mean[2] == 0.0f);
  CHECK(mean[3] == 0.0f);
  CHECK(mean[4] == 1e-44f);
}

TEST_CASE("A non-finite gradient is refused") {
  // NaN of either sign and inf of either sign, in the last element of a later bucket: the max
  // over bit patterns must see each of them.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const float v : {nan, -nan, inf, -inf}) {
    SelfCommunicator self;
    ExactShardSum sum(self, {{0, 2}, {2, 3}}, 5, 0, 2);
    sum.begin();
    const std::vector<float> ok = {1.0f, 2.0f, 3.0f, FLT_MAX, -FLT_MAX};
    const std::vector<float> bad = {1.0f, 2.0f, 3.0f, 4.0f, v};
    sum.add(0, ok, {});
    sum.add(1, bad, {});
    std::vector<float> out(5);
    INFO("value " << v);
    CHECK_THROWS_AS(sum.reduce(out, {}), CollectiveError);
  }
}

TEST_CASE("Buffers: the mean over shards, in shard order") {
  SelfCommunicator self;
  ExactShardSum sum(self, {{0, 1}}, 1, 2, 3);
  sum.begin();
  const std::vector<float> g = {0.0f};
  sum.add(0, g, std::vector<float>{1.0f, -0.0f});
  sum.add(1, g, std::vector<float>{2.0f, -0.0f});
  sum.add(2, g, std::vector<float>{6.0f, -0.0f});
  std::vector<float> out(1);
  std::vector<float> buffers(2);
  sum.reduce(out, buffers);
  CHECK(buffers[0] == 3.0f);
  CHECK(buffers[1] == 0.0f);
  CHECK_FALSE(std::signbit(buffers[1]));
}
