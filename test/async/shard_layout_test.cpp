// ShardLayout: contiguous, balanced shards over uneven sizes, owners, and the tensors a
// server's optimizer sees.
#include <catch2/catch.hpp>

#include <vector>

#include "async/ShardLayout.h"

using namespace ringtrain;

TEST_CASE("Shards cover the vector contiguously and differ by at most one float") {
  for (const std::size_t count : {0, 1, 2, 7, 10, 61706, 7850}) {
    for (const int shards : {1, 2, 3, 4, 7}) {
      const ShardLayout layout(count, shards);
      std::size_t expected_begin = 0;
      std::size_t smallest = count, largest = 0;
      for (int s = 0; s < shards; ++s) {
        INFO("count " << count << " shards " << shards << " shard " << s);
        CHECK(layout.begin(s) == expected_begin);
        expected_begin = layout.end(s);
        smallest = std::min(smallest, layout.size(s));
        largest = std::max(largest, layout.size(s));
        for (std::size_t i = layout.begin(s); i < layout.end(s); ++i) REQUIRE(layout.owner(i) == s);
      }
      CHECK(expected_begin == count);
      CHECK(largest - smallest <= 1);
      CHECK(layout.largest() == largest);
    }
  }
}

TEST_CASE("Uneven sizes: 10 floats over 3 servers are 4, 3, 3") {
  const ShardLayout layout(10, 3);
  CHECK(layout.begin(0) == 0);
  CHECK(layout.size(0) == 4);
  CHECK(layout.begin(1) == 4);
  CHECK(layout.size(1) == 3);
  CHECK(layout.begin(2) == 7);
  CHECK(layout.size(2) == 3);
  CHECK(layout.owner(3) == 0);
  CHECK(layout.owner(4) == 1);
  CHECK(layout.owner(9) == 2);
  CHECK_THROWS(layout.owner(10));
  CHECK_THROWS(layout.size(3));
  CHECK_THROWS(ShardLayout(10, 0));
}

TEST_CASE("A tensor cut by a boundary appears clipped in both shards") {
  // weight [0, 6), bias [6, 8), weight2 [8, 10): shards [0, 4) [4, 7) [7, 10).
  const std::vector<ParamInfo> params = {{"w", 0, 6, ParamKind::kWeight, 0},
                                         {"b", 6, 2, ParamKind::kBias, 0},
                                         {"w2", 8, 2, ParamKind::kWeight, 1}};
  const ShardLayout layout(10, 3);
  const auto s0 = layout.params_in(0, params);
  REQUIRE(s0.size() == 1);
  CHECK((s0[0].name == "w" && s0[0].offset == 0 && s0[0].count == 4));
  const auto s1 = layout.params_in(1, params);
  REQUIRE(s1.size() == 2);
  CHECK((s1[0].name == "w" && s1[0].offset == 0 && s1[0].count == 2));
  CHECK((s1[1].name == "b" && s1[1].offset == 2 && s1[1].count == 1 && s1[1].kind == ParamKind::kBias));
  const auto s2 = layout.params_in(2, params);
  REQUIRE(s2.size() == 2);
  CHECK((s2[0].name == "b" && s2[0].offset == 0 && s2[0].count == 1));
  CHECK((s2[1].name == "w2" && s2[1].offset == 1 && s2[1].count == 2));
  CHECK(layout.splits_a_tensor(params));
  CHECK_FALSE(ShardLayout(10, 1).splits_a_tensor(params));
}
