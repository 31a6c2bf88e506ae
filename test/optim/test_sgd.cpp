// SGD against hand-computed updates and a double-precision transcription of
// torch.optim.SGD's algorithm (momentum, dampening, Nesterov, weight decay, exemptions).
#include <catch2/catch.hpp>

#include "optim/Optimizer.h"
#include "optim_test_util.h"

namespace ringtrain {
namespace {

using test::require_close;

std::unique_ptr<Optimizer> make_sgd(double momentum, bool nesterov, double wd,
                                    double dampening, std::size_t n) {
  OptimizerConfig c;
  c.name = "sgd";
  c.momentum = momentum;
  c.nesterov = nesterov;
  c.weight_decay = wd;
  c.dampening = dampening;
  const auto layout = test::single_weight(n);
  return Optimizer::create(c, layout, n);
}

TEST_CASE("sgd without momentum: p -= lr * (g + wd * p)", "[optim][sgd]") {
  std::vector<float> p = {1.0f, -2.0f};
  const std::vector<float> g = {0.5f, 0.25f};
  SECTION("no decay") {
    auto opt = make_sgd(0.0, false, 0.0, 0.0, 2);
    CHECK(opt->state().empty());
    opt->step(p, g, 0.1);
    require_close(p, {0.95, -2.025});
  }
  SECTION("weight decay 0.01: d = [0.51, 0.23]") {
    auto opt = make_sgd(0.0, false, 0.01, 0.0, 2);
    opt->step(p, g, 0.1);
    require_close(p, {0.949, -2.023});
  }
}

TEST_CASE("sgd momentum: first step copies g, later steps damp", "[optim][sgd]") {
  // momentum 0.9, dampening 0.5: step 1 buf = g (no dampening, as PyTorch), step 2
  // buf = 0.9 * [0.5, 0.25] + 0.5 * [1, -1] = [0.95, -0.275].
  auto opt = make_sgd(0.9, false, 0.0, 0.5, 2);
  REQUIRE(opt->state().size() == 2);
  std::vector<float> p = {1.0f, -2.0f};
  opt->step(p, std::vector<float>{0.5f, 0.25f}, 0.1);
  require_close(p, {0.95, -2.025});
  require_close({opt->state().begin(), opt->state().end()}, {0.5, 0.25});
  opt->step(p, std::vector<float>{1.0f, -1.0f}, 0.1);
  require_close({opt->state().begin(), opt->state().end()}, {0.95, -0.275});
  require_close(p, {0.855, -1.9975});
  CHECK(opt->steps_taken() == 2);
}

TEST_CASE("sgd nesterov: u = g + momentum * buf", "[optim][sgd]") {
  // step 1: buf = g, u = 1.9 g = [0.95, 0.475]; step 2: buf = 0.9 g1 + g2 = [1.45, -0.775],
  // u = g2 + 0.9 buf = [2.305, -1.6975].
  auto opt = make_sgd(0.9, true, 0.0, 0.0, 2);
  std::vector<float> p = {1.0f, -2.0f};
  opt->step(p, std::vector<float>{0.5f, 0.25f}, 0.1);
  require_close(p, {0.905, -2.0475});
  opt->step(p, std::vector<float>{1.0f, -1.0f}, 0.1);
  require_close(p, {0.6745, -1.87775});
}

TEST_CASE("sgd decay_biases=false exempts biases and BatchNorm parameters", "[optim][sgd]") {
  const auto layout = test::mixed_layout();
  std::vector<float> p(test::kMixedSize, 2.0f);
  const std::vector<float> g(test::kMixedSize, 0.0f);  // only decay moves parameters
  for (bool decay_biases : {true, false}) {
    OptimizerConfig c;
    c.momentum = 0.0;
    c.weight_decay = 0.5;
    c.decay_biases = decay_biases;
    auto opt = Optimizer::create(c, layout, test::kMixedSize);
    std::vector<float> q = p;
    opt->step(q, g, 0.1);  // decayed: 2 - 0.1 * 0.5 * 2 = 1.9
    for (std::size_t i = 0; i < q.size(); ++i) {
      INFO("decay_biases " << decay_biases << " index " << i);
      const bool weight = i < 4;
      const double want = test::is_padding(i) ? 2.0 : (weight || decay_biases ? 1.9 : 2.0);
      CHECK(q[i] == Approx(want).epsilon(1e-6));
    }
  }
}

// torch.optim.SGD's algorithm, transcribed in double from its documentation.
struct SgdReference {
  double momentum, dampening, wd;
  bool nesterov;
  std::vector<double> buf;
  bool first = true;
  void step(std::vector<double>& p, const std::vector<float>& g, double lr,
            const std::vector<test::Role>& roles) {
    if (buf.empty()) buf.assign(p.size(), 0.0);
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (roles[i] == test::Role::kUntouched) continue;
      double d = g[i] + (roles[i] == test::Role::kDecay ? wd : 0.0) * p[i];
      if (momentum != 0) {
        buf[i] = first ? d : momentum * buf[i] + (1 - dampening) * d;
        d = nesterov ? d + momentum * buf[i] : buf[i];
      }
      p[i] -= lr * d;
    }
    first = false;
  }
};

TEST_CASE("sgd matches the PyTorch algorithm over several steps and layouts", "[optim][sgd]") {
  struct Case { double momentum, dampening, wd; bool nesterov, decay_biases; };
  const Case cases[] = {{0.0, 0.0, 0.0, false, true},  {0.9, 0.0, 0.0, false, true},
                        {0.9, 0.0, 1e-2, true, true},  {0.5, 0.3, 1e-2, false, false},
                        {0.9, 0.0, 5e-2, true, false}, {0.0, 0.0, 1e-1, false, false}};
  const auto layout = test::mixed_layout();
  const double lrs[] = {0.1, 0.05, 0.2, 0.01, 0.1};
  for (const Case& k : cases) {
    OptimizerConfig c;
    c.momentum = k.momentum;
    c.dampening = k.dampening;
    c.weight_decay = k.wd;
    c.nesterov = k.nesterov;
    c.decay_biases = k.decay_biases;
    auto opt = Optimizer::create(c, layout, test::kMixedSize);
    const auto roles = test::mixed_roles(k.decay_biases);
    SgdReference ref{k.momentum, k.dampening, k.wd, k.nesterov, {}};
    std::mt19937 gen(7);
    std::vector<float> p = test::random_vector(test::kMixedSize, gen);
    std::vector<double> want(p.begin(), p.end());
    for (double lr : lrs) {
      const std::vector<float> g = test::random_vector(test::kMixedSize, gen);
      opt->step(p, g, lr);
      ref.step(want, g, lr, roles);
    }
    INFO("momentum " << k.momentum << " dampening " << k.dampening << " wd " << k.wd
                     << " nesterov " << k.nesterov << " decay_biases " << k.decay_biases);
    require_close(p, want);
  }
}

TEST_CASE("sgd never touches floats outside the parameter ranges", "[optim][sgd]") {
  const auto layout = test::mixed_layout();
  OptimizerConfig c;
  c.weight_decay = 0.1;
  auto opt = Optimizer::create(c, layout, test::kMixedSize);
  std::vector<float> p(test::kMixedSize, 3.0f);
  const std::vector<float> g(test::kMixedSize, 1.0f);
  for (int s = 0; s < 3; ++s) opt->step(p, g, 0.1);
  CHECK(p[6] == 3.0f);
  CHECK(p[7] == 3.0f);
  CHECK(opt->state()[6] == 0.0f);
  CHECK(p[0] != 3.0f);
}

}  // namespace
}  // namespace ringtrain
