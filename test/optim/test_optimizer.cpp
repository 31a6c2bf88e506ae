// Optimizer::create validation, parameter-layout and step-argument checks, and the
// checkpoint round trip of state() and steps_taken() (bit-for-bit).
#include <cmath>
#include <cstring>
#include <limits>

#include <catch2/catch.hpp>

#include "optim/Optimizer.h"
#include "optim_test_util.h"

namespace ringtrain {
namespace {

using Catch::Matchers::Contains;

OptimizerConfig named(const std::string& name) {
  OptimizerConfig c;
  c.name = name;
  return c;
}

void require_rejected(const OptimizerConfig& c, const std::string& fragment) {
  const auto layout = test::single_weight(4);
  INFO("optimizer " << c.name << ", expecting an error mentioning \"" << fragment << "\"");
  REQUIRE_THROWS_AS(Optimizer::create(c, layout, 4), std::invalid_argument);
  REQUIRE_THROWS_WITH(Optimizer::create(c, layout, 4), Contains(fragment));
  REQUIRE_THROWS_AS(validate_optimizer_config(c), std::invalid_argument);
}

TEST_CASE("create builds every known optimizer under its name", "[optim]") {
  const auto layout = test::single_weight(4);
  for (const std::string& name : Optimizer::known_names()) {
    auto opt = Optimizer::create(named(name), layout, 4);
    CHECK(opt->name() == name);
    CHECK(opt->steps_taken() == 0);
  }
  CHECK(Optimizer::known_names().size() == 4);
}

TEST_CASE("create rejects bad hyper-parameters, naming the option", "[optim]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  require_rejected(named("rmsprop"), "unknown optimizer \"rmsprop\"");
  require_rejected(named("SGD"), "sgd, adam, adamw, lars");
  for (const char* name : {"sgd", "adam", "adamw", "lars"}) {
    auto c = named(name);
    c.weight_decay = -1e-4;
    require_rejected(c, "weight_decay");
    c.weight_decay = nan;
    require_rejected(c, "weight_decay");
  }
  for (const char* name : {"sgd", "lars"}) {
    auto c = named(name);
    c.momentum = -0.1;
    require_rejected(c, "momentum");
    c.momentum = 1.0;
    require_rejected(c, "momentum");
  }
  auto c = named("sgd");
  c.dampening = -0.5;
  require_rejected(c, "dampening");
  c = named("sgd");
  c.momentum = 0.0;
  c.nesterov = true;
  require_rejected(c, "nesterov requires momentum > 0");
  c = named("sgd");
  c.nesterov = true;
  c.dampening = 0.1;
  require_rejected(c, "nesterov requires momentum > 0 and dampening 0");
  for (const char* name : {"adam", "adamw", "lars"}) {
    c = named(name);
    c.nesterov = true;
    require_rejected(c, "nesterov applies to sgd only");
    c = named(name);
    c.dampening = 0.1;
    require_rejected(c, "dampening applies to sgd only");
  }
  for (const char* name : {"adam", "adamw"}) {
    c = named(name);
    c.beta1 = 1.0;
    require_rejected(c, "beta1");
    c = named(name);
    c.beta2 = -0.1;
    require_rejected(c, "beta2");
    c = named(name);
    c.eps = 0.0;
    require_rejected(c, "eps");
  }
  c = named("lars");
  c.lars_eta = 0.0;
  require_rejected(c, "lars_eta");
  // Options another optimizer uses are not checked: sgd ignores the Adam betas.
  c = named("sgd");
  c.beta1 = 5.0;
  const auto layout = test::single_weight(4);
  CHECK_NOTHROW(Optimizer::create(c, layout, 4));
}

TEST_CASE("create rejects parameter ranges outside the buffer or overlapping", "[optim]") {
  const std::vector<ParamInfo> outside = {{"w", 0, 4, ParamKind::kWeight, 0},
                                          {"b", 4, 3, ParamKind::kBias, 0}};
  const std::vector<ParamInfo> overlap = {{"w", 0, 4, ParamKind::kWeight, 0},
                                          {"b", 3, 2, ParamKind::kBias, 0}};
  for (const std::string& name : Optimizer::known_names()) {
    INFO(name);
    REQUIRE_THROWS_WITH(Optimizer::create(named(name), outside, 6),
                        Contains("\"b\" [4, 7)") && Contains("6 floats"));
    REQUIRE_THROWS_WITH(Optimizer::create(named(name), overlap, 6),
                        Contains("\"w\"") && Contains("\"b\"") && Contains("overlap"));
  }
}

TEST_CASE("step rejects wrong buffer sizes and bad learning rates", "[optim]") {
  const auto layout = test::single_weight(4);
  std::vector<float> p(4, 1.0f), g(4, 1.0f), short_buf(3, 1.0f);
  for (const std::string& name : Optimizer::known_names()) {
    INFO(name);
    auto opt = Optimizer::create(named(name), layout, 4);
    REQUIRE_THROWS_WITH(opt->step(short_buf, g, 0.1), Contains("4 floats"));
    REQUIRE_THROWS_WITH(opt->step(p, short_buf, 0.1), Contains("4 floats"));
    REQUIRE_THROWS_WITH(opt->step(p, g, -0.1), Contains("learning rate"));
    REQUIRE_THROWS_WITH(opt->step(p, g, std::numeric_limits<double>::infinity()),
                        Contains("learning rate"));
    CHECK(opt->steps_taken() == 0);
    CHECK(p == std::vector<float>(4, 1.0f));
  }
}

OptimizerConfig round_trip_config(int which) {
  OptimizerConfig c;
  switch (which) {
    case 0: c.name = "sgd"; c.momentum = 0.9; c.nesterov = true; c.weight_decay = 1e-3; break;
    case 1: c.name = "sgd"; c.momentum = 0.0; c.weight_decay = 1e-3; break;
    case 2: c.name = "adam"; c.weight_decay = 1e-3; c.decay_biases = false; break;
    case 3: c.name = "adamw"; c.weight_decay = 1e-2; break;
    default: c.name = "lars"; c.weight_decay = 5e-4; c.lars_eta = 0.01; break;
  }
  return c;
}

bool bits_equal(std::span<const float> a, std::span<const float> b) {
  // memcmp on an empty span's null data() is undefined even for zero bytes (UBSan).
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

TEST_CASE("state() and steps_taken() restore an optimizer bit for bit", "[optim]") {
  const auto layout = test::mixed_layout();
  const std::size_t n = test::kMixedSize;
  for (int which = 0; which < 5; ++which) {
    const OptimizerConfig c = round_trip_config(which);
    INFO(c.name << " config " << which);
    std::mt19937 gen(17);
    std::vector<std::vector<float>> grads;
    for (int s = 0; s < 6; ++s) grads.push_back(test::random_vector(n, gen));
    const double lrs[] = {0.1, 0.05, 0.1, 0.02, 0.1, 0.01};
    std::vector<float> params = test::random_vector(n, gen);

    auto original = Optimizer::create(c, layout, n);
    for (int s = 0; s < 3; ++s) original->step(params, grads[s], lrs[s]);
    // The checkpoint: parameters, state floats, step count.
    const std::vector<float> saved_params = params;
    const std::vector<float> saved_state(original->state().begin(), original->state().end());
    const std::uint64_t saved_steps = original->steps_taken();
    CHECK(saved_steps == 3);
    for (int s = 3; s < 6; ++s) original->step(params, grads[s], lrs[s]);

    auto restored = Optimizer::create(c, layout, n);
    REQUIRE(restored->state().size() == saved_state.size());
    std::copy(saved_state.begin(), saved_state.end(), restored->state().begin());
    restored->set_steps_taken(saved_steps);
    std::vector<float> resumed = saved_params;
    for (int s = 3; s < 6; ++s) restored->step(resumed, grads[s], lrs[s]);

    CHECK(bits_equal(resumed, params));
    CHECK(bits_equal(restored->state(), original->state()));
    CHECK(restored->steps_taken() == 6);

    // Without the step count, SGD's first-step rule and Adam's bias correction differ.
    if (c.name == "adam" || c.name == "adamw" || (c.name == "sgd" && c.momentum > 0)) {
      auto forgetful = Optimizer::create(c, layout, n);
      std::copy(saved_state.begin(), saved_state.end(), forgetful->state().begin());
      std::vector<float> diverged = saved_params;
      for (int s = 3; s < 6; ++s) forgetful->step(diverged, grads[s], lrs[s]);
      CHECK_FALSE(bits_equal(diverged, params));
    }
  }
}

}  // namespace
}  // namespace ringtrain
