// Optimizer::set_update_observer: blocked updates give the same bits as unblocked ones, and
// the observer sees every parameter range exactly once per step, in order, already final.
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "optim/Optimizer.h"
#include "optim_test_util.h"

namespace ringtrain {
namespace {

constexpr std::size_t kBlock = Optimizer::kUpdateBlock;

// Tensors spanning several blocks, ending mid-block, exactly one block and a single float,
// with padding between some of them (never reported) and neighbours that merge.
std::vector<ParamInfo> blocked_layout() {
  return {
      {"fc2.weight", 0, 2 * kBlock + 100, ParamKind::kWeight, 1},
      {"fc2.bias", 2 * kBlock + 100, 10, ParamKind::kBias, 1},
      // 6 floats of padding
      {"bn.scale", 2 * kBlock + 116, 1, ParamKind::kNormScale, 2},
      {"bn.shift", 2 * kBlock + 117, 3, ParamKind::kNormShift, 2},
      // 12 floats of padding
      {"fc1.weight", 2 * kBlock + 132, kBlock, ParamKind::kWeight, 3},
      {"fc1.bias", 3 * kBlock + 132, 20, ParamKind::kBias, 3},
  };
}
constexpr std::size_t kBlockedSize = 3 * kBlock + 160;  // 8 floats of padding at the end

std::vector<OptimizerConfig> configs() {
  std::vector<OptimizerConfig> out;
  auto add = [&](const std::string& name, auto&& edit) {
    OptimizerConfig c;
    c.name = name;
    c.weight_decay = 1e-2;
    edit(c);
    out.push_back(c);
  };
  add("sgd", [](OptimizerConfig&) {});
  add("sgd", [](OptimizerConfig& c) { c.nesterov = true; });
  add("sgd", [](OptimizerConfig& c) {
    c.dampening = 0.3;
    c.decay_biases = false;
  });
  add("sgd", [](OptimizerConfig& c) { c.momentum = 0; });
  add("adam", [](OptimizerConfig&) {});
  add("adamw", [](OptimizerConfig& c) { c.decay_biases = false; });
  add("lars", [](OptimizerConfig&) {});
  add("lars", [](OptimizerConfig& c) { c.momentum = 0; });
  return out;
}

// An optimizer without state (momentum 0) has empty spans, whose data() may be null, which
// memcmp must not be given even for 0 bytes.
bool same_bits(const float* a, const float* b, std::size_t n) {
  return n == 0 || std::memcmp(a, b, n * sizeof(float)) == 0;
}

struct Range {
  std::size_t offset, count;
};

TEST_CASE("an update observer changes no bits and sees every parameter once, in order",
          "[optim]") {
  const auto layout = blocked_layout();
  std::vector<bool> covered(kBlockedSize, false);
  for (const ParamInfo& info : layout) {
    for (std::size_t i = info.offset; i < info.offset + info.count; ++i) covered[i] = true;
  }
  std::mt19937 gen(20);
  for (const OptimizerConfig& config : configs()) {
    INFO(config.name << " momentum " << config.momentum << " nesterov " << config.nesterov
                     << " decay_biases " << config.decay_biases);
    auto plain = Optimizer::create(config, layout, kBlockedSize);
    auto observed = Optimizer::create(config, layout, kBlockedSize);
    std::vector<float> p_plain = test::random_vector(kBlockedSize, gen);
    std::vector<float> p_observed = p_plain;
    std::vector<Range> seen;
    observed->set_update_observer([&](std::size_t offset, std::size_t count) {
      seen.push_back({offset, count});
      // Final when reported: equal to the unobserved optimizer's result of this step.
      REQUIRE(same_bits(p_observed.data() + offset, p_plain.data() + offset, count));
      const auto s_plain = plain->state(), s_observed = observed->state();
      for (std::size_t base = 0; base < s_plain.size(); base += kBlockedSize) {
        REQUIRE(same_bits(s_observed.data() + base + offset, s_plain.data() + base + offset,
                          count));
      }
    });
    for (int step = 0; step < 3; ++step) {
      const std::vector<float> grads = test::random_vector(kBlockedSize, gen);
      const double lr = 0.05 * (step + 1);
      plain->step(p_plain, grads, lr);
      seen.clear();
      observed->step(p_observed, grads, lr);

      REQUIRE(same_bits(p_observed.data(), p_plain.data(), kBlockedSize));
      REQUIRE(observed->state().size() == plain->state().size());
      REQUIRE(same_bits(observed->state().data(), plain->state().data(),
                        plain->state().size()));
      std::vector<int> times(kBlockedSize, 0);
      std::size_t end = 0;
      for (const Range& r : seen) {
        REQUIRE(r.count > 0);
        REQUIRE(r.count <= kBlock);
        REQUIRE(r.offset >= end);  // increasing, never overlapping
        end = r.offset + r.count;
        REQUIRE(end <= kBlockedSize);
        for (std::size_t i = r.offset; i < end; ++i) ++times[i];
      }
      for (std::size_t i = 0; i < kBlockedSize; ++i) {
        INFO("float " << i);
        REQUIRE(times[i] == (covered[i] ? 1 : 0));
      }
    }
  }
}

TEST_CASE("blocks split a long tensor at multiples of kUpdateBlock", "[optim]") {
  static_assert(kBlock % 16 == 0, "blocks are whole 64-byte lines");
  const auto layout = test::single_weight(2 * kBlock + 5);
  OptimizerConfig config;
  auto opt = Optimizer::create(config, layout, 2 * kBlock + 5);
  std::vector<std::pair<std::size_t, std::size_t>> seen;
  opt->set_update_observer([&](std::size_t o, std::size_t n) { seen.emplace_back(o, n); });
  std::vector<float> params(2 * kBlock + 5, 1.0f), grads(2 * kBlock + 5, 0.5f);
  opt->step(params, grads, 0.1);
  REQUIRE(seen == std::vector<std::pair<std::size_t, std::size_t>>{
                      {0, kBlock}, {kBlock, kBlock}, {2 * kBlock, 5}});

  opt->set_update_observer({});  // removed: no more reports
  seen.clear();
  opt->step(params, grads, 0.1);
  CHECK(seen.empty());
}

}  // namespace
}  // namespace ringtrain
