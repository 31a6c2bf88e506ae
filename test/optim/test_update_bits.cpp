// The update loops run as one clone per vector ISA (common/CpuDispatch.h's
// RINGTRAIN_STREAM_CLONES), and the CPU picks the clone. Each must give the bits of plain per-element float arithmetic, one rounding per
// operation as the source writes it (no fused multiply-add), or ranks on CPUs with different
// vector units drift apart and a run no longer matches its checkpoint on another machine.
// Tensors of odd lengths starting at every float of a 64-byte line reach the clones' peeled
// heads and remainders. This file is compiled with -ffp-contract=off, so the references below
// are unfused in every build.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "optim/Optimizer.h"
#include "optim_test_util.h"

namespace ringtrain {
namespace {

constexpr std::size_t kLengths[] = {1, 7, 16, 33, 100, 1031};
constexpr std::size_t kLineFloats = 16;
constexpr double kLrs[] = {0.1, 0.05, 0.2};
using Floats = std::vector<float>;

bool same_bits(const std::vector<float>& a, const float* b) {
  return std::memcmp(a.data(), b, a.size() * sizeof(float)) == 0;
}

// A buffer of `size` floats whose first float starts a 64-byte line.
struct LineBuffer {
  std::vector<float> storage;
  float* data;
  explicit LineBuffer(std::size_t size) : storage(size + kLineFloats) {
    const auto misalign = reinterpret_cast<std::uintptr_t>(storage.data()) % 64 / sizeof(float);
    data = storage.data() + (misalign == 0 ? 0 : kLineFloats - misalign);
  }
};

// SGD as Sgd.cpp writes it, per float.
struct SgdReference {
  float lr, wd, momentum, keep;
  bool nesterov, with_momentum;
  void step(std::vector<float>& p, const std::vector<float>& g, std::vector<float>& buf, bool first) const {
    for (std::size_t i = 0; i < p.size(); ++i) {
      const float d = g[i] + wd * p[i];
      if (!with_momentum) {
        p[i] -= lr * d;
        continue;
      }
      const float b = first ? d : momentum * buf[i] + keep * d;
      buf[i] = b;
      p[i] -= lr * (nesterov ? d + momentum * b : b);
    }
  }
};

// Runs `config` over one tensor of `kind` at float `shift` of a line-aligned buffer for the
// three learning rates, and `reference(lr, step, p, g)` over plain vectors; the tensor's
// floats and the optimizer's state must be equal bit for bit after every step.
template <typename Reference>
void check_bits(const OptimizerConfig& config, ParamKind kind, Reference&& reference) {
  std::mt19937 gen(11);
  for (std::size_t n : kLengths) {
    for (std::size_t shift = 0; shift < kLineFloats; ++shift) {
      const std::size_t size = shift + n + 3;
      const std::vector<ParamInfo> layout = {{"t", shift, n, kind, 0}};
      auto opt = Optimizer::create(config, layout, size);
      LineBuffer params(size);
      std::vector<float> p = test::random_vector(n, gen);
      std::copy(p.begin(), p.end(), params.data + shift);
      for (std::size_t step = 0; step < std::size(kLrs); ++step) {
        std::vector<float> grads(size, 0.0f);
        const std::vector<float> g = test::random_vector(n, gen);
        std::copy(g.begin(), g.end(), grads.begin() + static_cast<std::ptrdiff_t>(shift));
        opt->step({params.data, size}, grads, kLrs[step]);
        const std::vector<float> state = reference(kLrs[step], step, p, g);
        INFO(config.name << " length " << n << " shift " << shift << " step " << step + 1);
        REQUIRE(same_bits(p, params.data + shift));
        const std::size_t per_tensor = opt->state().size() / size;
        for (std::size_t k = 0; k < per_tensor; ++k) {
          REQUIRE(same_bits(std::vector<float>(state.begin() + static_cast<std::ptrdiff_t>(k * n),
                                               state.begin() + static_cast<std::ptrdiff_t>((k + 1) * n)),
                            opt->state().data() + k * size + shift));
        }
      }
    }
  }
}

TEST_CASE("sgd's update clones give the per-element float bits", "[optim][sgd]") {
  struct Case {
    double momentum, dampening, wd;
    bool nesterov;
  };
  const Case cases[] = {
      {0.9, 0.0, 1e-2, false}, {0.9, 0.0, 1e-2, true}, {0.5, 0.3, 1e-2, false}, {0.0, 0.0, 1e-2, false}};
  for (const Case& k : cases) {
    OptimizerConfig c;
    c.momentum = k.momentum;
    c.dampening = k.dampening;
    c.weight_decay = k.wd;
    c.nesterov = k.nesterov;
    std::vector<float> buf;
    check_bits(c, ParamKind::kWeight, [&](double lr, std::size_t step, Floats& p, const Floats& g) {
      if (step == 0) buf.assign(p.size(), 0.0f);
      const SgdReference ref{static_cast<float>(lr), static_cast<float>(k.wd), static_cast<float>(k.momentum),
                             1.0f - static_cast<float>(k.dampening), k.nesterov, k.momentum > 0};
      ref.step(p, g, buf, step == 0);
      return k.momentum > 0 ? buf : std::vector<float>{};
    });
  }
}

TEST_CASE("adam's and adamw's update clones give the per-element float bits", "[optim][adam]") {
  for (const std::string name : {"adam", "adamw"}) {
    OptimizerConfig c;
    c.name = name;
    c.weight_decay = 1e-2;
    std::vector<float> m, v;
    check_bits(c, ParamKind::kWeight, [&](double lr, std::size_t step, Floats& p, const Floats& g) {
      if (step == 0) m.assign(p.size(), 0.0f), v.assign(p.size(), 0.0f);
      const double t = static_cast<double>(step + 1);
      const auto step_size = static_cast<float>(lr / (1.0 - std::pow(c.beta1, t)));
      const auto bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(c.beta2, t)));
      const bool decoupled = name == "adamw";
      const float wd = decoupled ? 0.0f : static_cast<float>(c.weight_decay);
      const auto factor = static_cast<float>(1.0 - lr * c.weight_decay);
      const auto b1 = static_cast<float>(c.beta1), b2 = static_cast<float>(c.beta2);
      const auto omb1 = static_cast<float>(1.0 - c.beta1), omb2 = static_cast<float>(1.0 - c.beta2);
      for (std::size_t i = 0; i < p.size(); ++i) {
        if (decoupled) p[i] *= factor;
        const float gi = g[i] + wd * p[i];
        m[i] = b1 * m[i] + omb1 * gi;
        v[i] = b2 * v[i] + omb2 * gi * gi;
        p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + static_cast<float>(c.eps));
      }
      std::vector<float> state = m;
      state.insert(state.end(), v.begin(), v.end());
      return state;
    });
  }
}

TEST_CASE("lars's update clones give the per-element float bits (exempt tensor: trust 1)", "[optim][lars]") {
  // A bias is exempt from LARS's trust ratio and decay, so the update is the momentum loop
  // with lr itself, without the norms (whose summation is not cloned).
  for (double momentum : {0.9, 0.0}) {
    OptimizerConfig c;
    c.name = "lars";
    c.momentum = momentum;
    c.weight_decay = 1e-2;
    std::vector<float> buf;
    check_bits(c, ParamKind::kBias, [&](double lr, std::size_t step, Floats& p, const Floats& g) {
      if (step == 0) buf.assign(p.size(), 0.0f);
      const auto local_lr = static_cast<float>(lr);
      const auto mom = static_cast<float>(momentum);
      for (std::size_t i = 0; i < p.size(); ++i) {
        if (momentum == 0) {
          p[i] -= local_lr * (g[i] + 0.0f * p[i]);
          continue;
        }
        const float b = mom * buf[i] + local_lr * (g[i] + 0.0f * p[i]);
        buf[i] = b;
        p[i] -= b;
      }
      return momentum > 0 ? buf : std::vector<float>{};
    });
  }
}

}  // namespace
}  // namespace ringtrain
