// Liveness-planned activation memory: ActivationArena's placement, and whole models giving the
// same bits with buffers shared as with a buffer each.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "model_harness.h"
#include "nn/ActivationArena.h"
#include "nn/GraphPlan.h"

using namespace ringtrain;
using namespace ringtrain::test;
using dnnl::memory;

namespace {

memory::desc floats(std::int64_t n) { return memory::desc({n}, memory::data_type::f32, memory::format_tag::a); }

char* at(const memory& m) { return static_cast<char*>(m.get_data_handle()); }

// Two training steps (SGD between them) and an eval forward; everything a caller can see.
std::vector<float> observe(Model& m, const Batch& b) {
  m.init(3);
  std::vector<float> seen;
  for (int step = 0; step < 2; ++step) {
    seen.push_back(static_cast<float>(mean_loss(m, b)));
    seen.insert(seen.end(), m.logits().begin(), m.logits().end());
    m.backward();
    seen.insert(seen.end(), m.grads().begin(), m.grads().end());
    sgd_step(m, 1e-4f);  // small: a second step that is finite, not a trained model
  }
  mean_loss(m, b, Phase::kEval);
  seen.insert(seen.end(), m.logits().begin(), m.logits().end());
  seen.insert(seen.end(), m.buffers().begin(), m.buffers().end());
  return seen;
}

}  // namespace

TEST_CASE("ActivationArena shares bytes only between buffers that are never live together", "[nn][memory]") {
  ActivationArena arena;
  const memory a = arena.create(floats(1000)), b = arena.create(floats(1000)), c = arena.create(floats(500));
  const memory a2 = arena.alias(floats(800), a);  // in place over a: one buffer
  arena.use(a, 0);
  arena.use(a2, 2);  // a's buffer lives over steps 0..2
  arena.use(b, 3);
  arena.use(b, 5);
  arena.use(c, 1);  // overlaps a's life, not b's
  arena.place(true);
  CHECK(at(a) == at(a2));
  CHECK(at(b) == at(a));  // 0..2 and 3..5: the same bytes
  CHECK((at(c) >= at(a) + 4000 || at(c) + 2000 <= at(a)));
  CHECK(arena.separate_bytes() == 4032 + 4032 + 2048);  // 64-byte aligned
  CHECK(arena.bytes() == 4032 + 2048);
  CHECK_THROWS_AS(arena.alias(floats(2000), c), std::logic_error);

  ActivationArena apart;
  const memory x = apart.create(floats(10)), y = apart.create(floats(10));
  apart.use(x, 0);
  apart.use(y, 1);
  apart.place(false);
  CHECK(at(x) != at(y));
  CHECK(apart.bytes() == apart.separate_bytes());
}

TEST_CASE("Planned memory gives the bits of a buffer per tensor", "[nn][memory]") {
  struct Case {
    const char* name;
    ImageShape shape;
    int batch;
  };
  // resnet20: skips and fusions; mobilenetv2: depthwise, ReLU6, adds without ReLU; alexnet:
  // dropout and LRN; lenet5: max pooling and a plain chain.
  for (const Case c : {Case{"resnet20", {1, 28, 28}, 2}, Case{"mobilenetv2", {3, 32, 32}, 2},
                       Case{"alexnet", {3, 32, 32}, 2}, Case{"lenet5", {1, 28, 28}, 4}}) {
    INFO(c.name);
    const Batch b = random_batch(c.shape, c.batch, 10, 41);
    Model planned(c.name, c.shape, 10), separate(c.name, c.shape, 10);
    separate.set_memory_planning(false);
    const std::vector<float> got = observe(planned, b), want = observe(separate, b);
    REQUIRE(got.size() == want.size());
    std::size_t differ = 0, first = got.size();
    for (std::size_t i = 0; i < got.size(); ++i)
      if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && differ++ == 0) first = i;
    INFO("first difference at " << first << " of " << got.size());
    CHECK(differ == 0);
    // Every buffer starts as NaN (ActivationArena): a tensor read before it was written would
    // carry NaN into the loss, the logits or the gradients.
    const auto bad = std::find_if(got.begin(), got.end(), [](float x) { return !std::isfinite(x); });
    INFO("first non-finite value at " << bad - got.begin() << ", parameters " << planned.num_params());
    CHECK(bad == got.end());
    const PlanStats p = planned.plan(c.batch, Phase::kTrain).stats();
    const PlanStats s = separate.plan(c.batch, Phase::kTrain).stats();
    CHECK(s.planned_bytes == s.separate_bytes);
    CHECK(p.separate_bytes == s.separate_bytes);
    CHECK(p.planned_bytes < s.planned_bytes);
  }
}
