// LARS against hand-computed trust ratios (known norms), the exclusion of biases and
// BatchNorm parameters, zero norms, and a double-precision transcription of Algorithm 1
// of You, Gitman & Ginsburg 2017.
#include <cmath>

#include <catch2/catch.hpp>

#include "optim/Optimizer.h"
#include "optim_test_util.h"

namespace ringtrain {
namespace {

using test::require_close;

OptimizerConfig lars_config(double momentum, double wd, double eta) {
  OptimizerConfig c;
  c.name = "lars";
  c.momentum = momentum;
  c.weight_decay = wd;
  c.lars_eta = eta;
  return c;
}

TEST_CASE("lars trust ratio, exclusions and zero norms, two steps by hand", "[optim][lars]") {
  // eta 0.02, wd 0.1, momentum 0.9, lr 1.
  const std::vector<ParamInfo> layout = {
      {"a.weight", 0, 2, ParamKind::kWeight, 0},   {"a.bias", 2, 2, ParamKind::kBias, 0},
      {"bn.scale", 4, 1, ParamKind::kNormScale, 1}, {"bn.shift", 5, 1, ParamKind::kNormShift, 1},
      {"b.weight", 6, 2, ParamKind::kWeight, 2},
  };
  auto opt = Optimizer::create(lars_config(0.9, 0.1, 0.02), layout, 8);
  REQUIRE(opt->state().size() == 8);
  std::vector<float> p = {3, 4, 1, -1, 2, 0, 0, 0};

  // Step 1. a.weight: ||w|| = 5, ||g|| = 1, trust = 0.02 * 5 / (1 + 0.1 * 5) = 1/15,
  //   v = (1/15) * (g + 0.1 w) = (1/15) * [0.9, 1.2] = [0.06, 0.08].
  // a.bias, bn.*: trust 1, no decay: v = g. b.weight: ||w|| = 0 -> trust 1, v = g.
  opt->step(p, std::vector<float>{0.6f, 0.8f, 0.5f, 0.5f, 0.25f, 0.25f, 1, 2}, 1.0);
  require_close(p, {2.94, 3.92, 0.5, -1.5, 1.75, -0.25, -1, -2});

  // Step 2. a.weight: ||w|| = 4.9, g = [0, 2], trust = 0.098 / 2.49,
  //   v = 0.9 [0.06, 0.08] + trust * [0.294, 2.392].
  // b.weight: ||g|| = 0 -> trust 1: v = 0.9 [1, 2] + 0.1 [-1, -2] = [0.8, 1.6].
  opt->step(p, std::vector<float>{0, 2, 0.5f, 0.5f, 0.25f, 0.25f, 0, 0}, 1.0);
  const double trust = 0.098 / 2.49;
  const double v0 = 0.054 + trust * 0.294, v1 = 0.072 + trust * 2.392;
  require_close(p, {2.94 - v0, 3.92 - v1, -0.45, -2.45, 1.275, -0.725, -1.8, -3.6});
  CHECK(p[0] == Approx(2.87442891566).epsilon(1e-6));  // the same, from a calculator
}

TEST_CASE("lars without decay is invariant to the gradient's scale", "[optim][lars]") {
  // trust = eta ||w|| / ||g||, so the step lr * eta * ||w|| * g / ||g|| ignores |g|.
  const auto layout = test::single_weight(19);
  std::mt19937 gen(5);
  const std::vector<float> p0 = test::random_vector(19, gen);
  const std::vector<float> g = test::random_vector(19, gen);
  std::vector<float> g_big = g;
  for (float& x : g_big) x *= 64.0f;  // exact in float
  std::vector<float> p_small = p0, p_big = p0;
  Optimizer::create(lars_config(0.0, 0.0, 0.001), layout, 19)->step(p_small, g, 0.5);
  Optimizer::create(lars_config(0.0, 0.0, 0.001), layout, 19)->step(p_big, g_big, 0.5);
  double w_norm = 0, g_norm = 0;
  for (std::size_t i = 0; i < 19; ++i) {
    w_norm += p0[i] * double(p0[i]);
    g_norm += g[i] * double(g[i]);
  }
  const double scale = 0.5 * 0.001 * std::sqrt(w_norm) / std::sqrt(g_norm);
  std::vector<double> want(19);
  for (std::size_t i = 0; i < 19; ++i) want[i] = p0[i] - scale * g[i];
  require_close(p_small, want);
  require_close(p_big, want);
}

// Algorithm 1 of You et al. 2017, in double, per tensor of the mixed layout.
void lars_reference(std::vector<double>& p, std::vector<double>& v, const std::vector<float>& g,
                    double lr, double momentum, double wd, double eta,
                    const std::vector<ParamInfo>& layout) {
  for (const ParamInfo& t : layout) {
    const bool weight = t.kind == ParamKind::kWeight;
    double wn = 0, gn = 0;
    for (std::size_t i = t.offset; i < t.offset + t.count; ++i) {
      wn += p[i] * p[i];
      gn += double(g[i]) * g[i];
    }
    wn = std::sqrt(wn), gn = std::sqrt(gn);
    const double trust = weight && wn > 0 && gn > 0 ? eta * wn / (gn + wd * wn) : 1.0;
    const double decay = weight ? wd : 0.0;
    for (std::size_t i = t.offset; i < t.offset + t.count; ++i) {
      v[i] = momentum * v[i] + lr * trust * (g[i] + decay * p[i]);
      p[i] -= v[i];
    }
  }
}

TEST_CASE("lars matches Algorithm 1 over several steps", "[optim][lars]") {
  // A 21-float weight exercises the 8-lane norm loop and its tail.
  const std::vector<ParamInfo> layout = {
      {"c.bias", 0, 3, ParamKind::kBias, 1},      {"c.weight", 3, 21, ParamKind::kWeight, 1},
      {"bn.scale", 24, 3, ParamKind::kNormScale, 0}, {"bn.shift", 27, 3, ParamKind::kNormShift, 0},
      {"fc.weight", 30, 6, ParamKind::kWeight, 0},
  };
  const std::size_t n = 36;
  for (double momentum : {0.0, 0.9}) {
    auto opt = Optimizer::create(lars_config(momentum, 5e-4, 0.001), layout, n);
    CHECK(opt->state().size() == (momentum > 0 ? n : 0u));
    std::mt19937 gen(9);
    std::vector<float> p = test::random_vector(n, gen);
    std::vector<double> want(p.begin(), p.end()), v(n, 0.0);
    for (double lr : {2.0, 1.0, 4.0, 0.5}) {
      const std::vector<float> g = test::random_vector(n, gen, -0.01f, 0.01f);
      opt->step(p, g, lr);
      lars_reference(want, v, g, lr, momentum, 5e-4, 0.001, layout);
    }
    INFO("momentum " << momentum);
    require_close(p, want);
    if (momentum > 0) require_close({opt->state().begin(), opt->state().end()}, v, 1e-5, 1e-9);
  }
}

}  // namespace
}  // namespace ringtrain
