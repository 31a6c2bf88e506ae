// Model::params_updated as an optimizer's update observer (what TrainStep wires in bf16):
// a model whose plain bf16 weight copies are narrowed inside the update trains bit for bit
// like one narrowed lazily at the next forward, and that forward narrows nothing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/Layer.h"
#include "nn/Model.h"
#include "nn/Precision.h"
#include "nn/layer_harness.h"
#include "optim/Optimizer.h"

using namespace ringtrain;
using ringtrain::test::random_floats;

namespace {

std::uint64_t weight_conversions(const Model& m) {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < m.num_layers(); ++i) n += m.layer(i).weight_conversions();
  return n;
}

std::vector<float> logits(const Model& m) { return {m.logits().begin(), m.logits().end()}; }

struct Twin {
  Model model;
  std::unique_ptr<Optimizer> optimizer;
  std::uint64_t conversions() const { return weight_conversions(model); }
};

Twin make_twin(const std::string& name, ImageShape shape, const OptimizerConfig& oc) {
  Twin t{Model(name, shape, 10), nullptr};
  t.model.set_precision(Precision::kBf16);
  t.model.init(7);
  t.optimizer = Optimizer::create(oc, t.model.param_infos(), t.model.num_params());
  return t;
}

// Checked after every update: same parameters, optimizer state and logits, bit for bit; the
// fused twin narrows all its plain copies in the update, so its next forward converts that
// many fewer copies than the lazy twin's (only non-plain ones, reordered as before).
void check_fused_twin(const std::string& name, ImageShape shape, const std::string& optimizer) {
  INFO(name << " with " << optimizer);
  OptimizerConfig oc;
  oc.name = optimizer;
  oc.weight_decay = 1e-3;
  Twin fused = make_twin(name, shape, oc), lazy = make_twin(name, shape, oc);
  fused.optimizer->set_update_observer(
      [&m = fused.model](std::size_t o, std::size_t n) { m.params_updated(o, n); });
  const int n = 4;
  const std::vector<std::int32_t> y{3, 7, 1, 0};
  std::uint64_t plain_copies = 0;
  for (int step = 0; step < 5; ++step) {
    const Phase phase = step == 4 ? Phase::kEval : Phase::kTrain;
    const auto x = random_floats(shape.numel() * n, 50 + static_cast<std::uint64_t>(step));
    const std::uint64_t f0 = fused.conversions(), l0 = lazy.conversions();
    for (Twin* t : {&fused, &lazy}) t->model.forward(x.data(), y.data(), n, phase, 3);
    REQUIRE(logits(fused.model) == logits(lazy.model));
    if (step > 0) CHECK((lazy.conversions() - l0) - (fused.conversions() - f0) == plain_copies);
    if (phase == Phase::kEval) break;
    for (Twin* t : {&fused, &lazy}) t->model.backward();
    const std::uint64_t f1 = fused.conversions(), l1 = lazy.conversions();
    for (Twin* t : {&fused, &lazy}) t->optimizer->step(t->model.params(), t->model.grads(), 0.05);
    CHECK(lazy.conversions() == l1);  // nothing until its next forward
    if (step == 0) plain_copies = fused.conversions() - f1;
    CHECK(fused.conversions() - f1 == plain_copies);
    REQUIRE(std::ranges::equal(std::as_const(fused.model).params(), std::as_const(lazy.model).params()));
    REQUIRE(std::ranges::equal(fused.optimizer->state(), lazy.optimizer->state()));
  }
  CHECK(plain_copies > 0);

  // A write that is not the optimizer's (a checkpoint load, a broadcast): the copies refresh.
  const auto x = random_floats(shape.numel() * n, 99);
  for (Twin* t : {&fused, &lazy}) {
    {
      const auto p = t->model.params();
      for (std::size_t i = 0; i < p.size(); i += 3) p[i] *= -1.0f;
    }
    t->model.forward(x.data(), y.data(), n, Phase::kEval);
  }
  CHECK(logits(fused.model) == logits(lazy.model));
}

}  // namespace

TEST_CASE("Narrowing inside the optimizer's update gives the lazily narrowed model's bits", "[optim][bf16]") {
  if (!isa_has_native_bf16(effective_isa())) {
    WARN("skipped: no native bf16 on this CPU");
    return;
  }
  // mlp: every weight copy plain bf16 (narrowed), tensors longer than one update block;
  // lenet5: blocked convolution copies (reordered lazily) beside narrowed inner products.
  check_fused_twin("mlp", {3, 32, 32}, "sgd");
  check_fused_twin("mlp", {3, 8, 8}, "adamw");
  check_fused_twin("lenet5", {1, 28, 28}, "lars");
}
