// Adam and AdamW against hand-computed bias-corrected steps and a double-precision
// transcription of torch.optim.Adam / AdamW.
#include <cmath>

#include <catch2/catch.hpp>

#include "optim/Optimizer.h"
#include "optim_test_util.h"

namespace ringtrain {
namespace {

using test::require_close;

std::unique_ptr<Optimizer> make_adam(const std::string& name, double wd, std::size_t n) {
  OptimizerConfig c;
  c.name = name;
  c.weight_decay = wd;
  const auto layout = test::single_weight(n);
  return Optimizer::create(c, layout, n);
}

// One parameter p0 = 1, gradients 0.5, -0.25, 1.0, lr 0.1, betas (0.9, 0.999), eps 1e-8.
// Step 1: m = 0.05, v = 2.5e-4, m/(1-0.9) = 0.5, v/(1-0.999) = 0.25: p = 1 - 0.1 * 0.5 /
// (0.5 + 1e-8). Steps 2 and 3 use bias corrections 1 - 0.9^t and 1 - 0.999^t; the
// expected values were worked out with those formulas on a calculator (Python floats).
TEST_CASE("adam bias correction at steps 1 to 3", "[optim][adam]") {
  const float grads[] = {0.5f, -0.25f, 1.0f};
  SECTION("adam") {
    auto opt = make_adam("adam", 0.0, 1);
    REQUIRE(opt->state().size() == 2);
    const double want[] = {0.900000002, 0.873366298708, 0.807555139677};
    std::vector<float> p = {1.0f};
    for (int t = 0; t < 3; ++t) {
      opt->step(p, std::vector<float>{grads[t]}, 0.1);
      CHECK(opt->steps_taken() == static_cast<std::uint64_t>(t + 1));
      CHECK(p[0] == Approx(want[t]).epsilon(1e-6));
    }
    // m3 = 0.9 * 0.02 + 0.1 * 1 = 0.118; v3 = 0.999 * 3.1225e-4 + 1e-3 = 1.31193775e-3.
    CHECK(opt->state()[0] == Approx(0.118).epsilon(1e-6));
    CHECK(opt->state()[1] == Approx(1.31193775e-3).epsilon(1e-6));
  }
  SECTION("adam with L2 weight decay 0.1 folds 0.1 * p into the gradient") {
    auto opt = make_adam("adam", 0.1, 1);
    const double want[] = {0.900000001667, 0.854441367462, 0.781504399863};
    std::vector<float> p = {1.0f};
    for (int t = 0; t < 3; ++t) {
      opt->step(p, std::vector<float>{grads[t]}, 0.1);
      CHECK(p[0] == Approx(want[t]).epsilon(1e-6));
    }
  }
  SECTION("adamw decays p by (1 - lr * wd) before the Adam step") {
    auto opt = make_adam("adamw", 0.1, 1);
    CHECK(opt->name() == "adamw");
    const double want[] = {0.890000002, 0.854466298688, 0.78011047667};
    std::vector<float> p = {1.0f};
    for (int t = 0; t < 3; ++t) {
      opt->step(p, std::vector<float>{grads[t]}, 0.1);
      CHECK(p[0] == Approx(want[t]).epsilon(1e-6));
    }
  }
}

// torch.optim.Adam / AdamW's algorithm (amsgrad off), transcribed in double.
struct AdamReference {
  AdamReference(bool decoupled_decay, double weight_decay)
      : decoupled(decoupled_decay), wd(weight_decay) {}
  bool decoupled;
  double wd;
  double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  std::vector<double> m, v;
  int t = 0;
  void step(std::vector<double>& p, const std::vector<float>& g, double lr,
            const std::vector<test::Role>& roles) {
    if (m.empty()) m.assign(p.size(), 0.0), v.assign(p.size(), 0.0);
    ++t;
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (roles[i] == test::Role::kUntouched) continue;
      const double w = roles[i] == test::Role::kDecay ? wd : 0.0;
      double gi = g[i];
      if (decoupled) p[i] *= 1 - lr * w;
      else gi += w * p[i];
      m[i] = b1 * m[i] + (1 - b1) * gi;
      v[i] = b2 * v[i] + (1 - b2) * gi * gi;
      const double m_hat = m[i] / (1 - std::pow(b1, t));
      const double v_hat = v[i] / (1 - std::pow(b2, t));
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
};

TEST_CASE("adam and adamw match the PyTorch algorithm on a mixed layout", "[optim][adam]") {
  const auto layout = test::mixed_layout();
  const double lrs[] = {1e-2, 5e-3, 1e-2, 2e-2, 1e-3, 1e-2};
  for (const char* name : {"adam", "adamw"}) {
    for (bool decay_biases : {true, false}) {
      OptimizerConfig c;
      c.name = name;
      c.weight_decay = 0.05;
      c.decay_biases = decay_biases;
      auto opt = Optimizer::create(c, layout, test::kMixedSize);
      AdamReference ref(std::string(name) == "adamw", 0.05);
      const auto roles = test::mixed_roles(decay_biases);
      std::mt19937 gen(11);
      std::vector<float> p = test::random_vector(test::kMixedSize, gen);
      std::vector<double> want(p.begin(), p.end());
      for (double lr : lrs) {
        const std::vector<float> g = test::random_vector(test::kMixedSize, gen);
        opt->step(p, g, lr);
        ref.step(want, g, lr, roles);
      }
      INFO(name << " decay_biases " << decay_biases);
      require_close(p, want);
      // state() is m then v, laid out like the parameters.
      auto state = opt->state();
      REQUIRE(state.size() == 2 * test::kMixedSize);
      require_close({state.begin(), state.begin() + 12}, ref.m, 1e-5, 1e-8);
      require_close({state.begin() + 12, state.end()}, ref.v, 1e-5, 1e-10);
    }
  }
}

TEST_CASE("adam handles buffers longer than its internal chunk", "[optim][adam]") {
  // 1000 floats cross the 512-float chunk boundary and leave a tail for the sqrt loop.
  const std::size_t n = 1000;
  auto opt = make_adam("adam", 0.0, n);
  std::mt19937 gen(3);
  std::vector<float> p = test::random_vector(n, gen);
  std::vector<double> want(p.begin(), p.end());
  AdamReference ref(false, 0.0);
  const std::vector<test::Role> roles(n, test::Role::kDecay);
  for (int s = 0; s < 3; ++s) {
    const std::vector<float> g = test::random_vector(n, gen);
    opt->step(p, g, 1e-2);
    ref.step(want, g, 1e-2, roles);
  }
  require_close(p, want);
}

}  // namespace
}  // namespace ringtrain
