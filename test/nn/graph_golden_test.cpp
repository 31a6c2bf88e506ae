// The sequential zoo models, now chains of a layer graph, keep the signatures and arena
// offsets they had as layer sequences (the golden was printed by main's code before graphs).
#include <catch2/catch.hpp>

#include <cstdio>
#include <sstream>
#include <string>

#include "chain_models_golden.h"
#include "nn/Model.h"

using namespace ringtrain;

TEST_CASE("Chain models keep the signatures and arena offsets of the layer sequences", "[nn][graph]") {
  struct Case {
    const char* name;
    ImageShape shape;
  };
  std::string now;
  for (const Case c : {Case{"logreg", {1, 28, 28}}, Case{"mlp", {3, 32, 32}}, Case{"lenet5", {1, 28, 28}},
                       Case{"svhn-cnn", {3, 32, 32}}, Case{"alexnet", {3, 32, 32}}, Case{"vgg11", {3, 32, 32}}}) {
    const Model m(c.name, c.shape, 10);
    now += std::string("=== ") + c.name + "\n" + m.signature();
    for (const auto& p : m.param_infos())
      now += p.name + " " + std::to_string(p.offset) + " " + std::to_string(p.count) + " " + std::to_string(p.layer) +
             "\n";
    now += "buffers " + std::to_string(m.buffers().size()) + "\n";
  }
  std::istringstream want(test::kChainModelsBefore), got(now);
  std::string w, g;
  int line = 0;
  while (std::getline(want, w)) {
    ++line;
    INFO("golden line " << line);
    REQUIRE(std::getline(got, g));
    CHECK(g == w);
  }
  CHECK_FALSE(std::getline(got, g));
  CHECK(line > 150);  // the golden is the whole listing
}
