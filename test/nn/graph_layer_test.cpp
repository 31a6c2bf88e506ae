// ReLU6, a single-input layer the graph models (MobileNetV2) add, against a naive double
// reference and its central differences (layer_harness.h): across both kinks and exactly
// at them, in place.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "layer_harness.h"
#include "nn/ReLU6.h"

using namespace ringtrain;
using namespace ringtrain::test;
using tag = dnnl::memory::format_tag;

namespace {

const RefForward relu6_ref = [](const Vec& x, const std::vector<Vec>&) {
  Vec y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = std::clamp(x[i], 0.0, 6.0);
  return y;
};

// x uniform in [-3, 9), kept 1e-3 away from the kinks at 0 and 6, where central differences
// (eps 1e-6) would straddle one.
std::vector<float> relu6_inputs(std::size_t n, std::uint64_t seed) {
  auto x = random_floats(n, seed, -3.f, 9.f);
  for (auto& v : x)
    for (const float kink : {0.f, 6.f})
      if (std::abs(v - kink) < 1e-3f) v = kink + (v < kink ? -1e-3f : 1e-3f);
  return x;
}

}  // namespace

TEST_CASE("ReLU6 matches clamp(x, 0, 6) and its central differences, plain, blocked and 2-D", "[nn][layer]") {
  for (auto [in, t] : {std::pair<Dims, tag>{{2, 3, 4, 5}, tag::undef}, {{2, 16, 3, 3}, tag::nChw16c}, {{4, 9}, tag::undef}}) {
    ReLU6 relu6("relu6");
    const auto x = relu6_inputs(numel(in), 3);
    const auto dy = random_floats(numel(in), 4);
    const LayerRun got = run_layer(relu6, in, x, {}, dy, Phase::kTrain, t);
    const RefGrads want = reference_grads(relu6_ref, to_double(x), {}, to_double(dy));
    INFO("input " << dims_str(in));
    CHECK(rel_error(got.y, want.y) < kForwardTol);
    CHECK(rel_error(got.dx, want.dx) < kBackwardTol);
    // Both sides of both kinks were exercised.
    CHECK(std::count(got.y.begin(), got.y.end(), 0.f) > 0);
    CHECK(std::count(got.y.begin(), got.y.end(), 6.f) > 0);
  }
}

TEST_CASE("ReLU6 at and next to the bounds: PyTorch's gradient, zero at exactly 0 and 6", "[nn][layer]") {
  // hardtanh_backward: the gradient passes where 0 < x < 6 strictly.
  const std::vector<float> x{-1.f, -0.f, 0.f, 1e-6f, 3.f, 5.999f, 6.f, 6.001f, 1e9f, -1e9f, 0.5f, 2.f, 4.f, 5.f, 7.f, 8.f};
  std::vector<float> dy(x.size());
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(i) + 1.f;
  ReLU6 relu6("relu6");
  const Dims in{1, 16, 1, 1};
  for (tag t : {tag::undef, tag::nChw16c}) {
    const LayerRun got = run_layer(relu6, in, x, {}, dy, Phase::kTrain, t);
    for (std::size_t i = 0; i < x.size(); ++i) {
      INFO("x = " << x[i]);
      CHECK(got.y[i] == std::clamp(x[i], 0.f, 6.f));
      CHECK(got.dx[i] == (x[i] > 0.f && x[i] < 6.f ? dy[i] : 0.f));
    }
  }
}

TEST_CASE("ReLU6 in place gives what it gives out of place", "[nn][layer]") {
  using dnnl::memory;
  auto& eng = DnnlContext::get().engine();
  auto& strm = DnnlContext::get().stream();
  const Dims in{2, 3, 4, 5};
  const auto x = relu6_inputs(numel(in), 5);
  const auto dy = random_floats(numel(in), 6);
  ReLU6 out_of_place("relu6"), in_place("relu6");
  CHECK(in_place.in_place());
  CHECK(in_place.needs_dst_in_backward());
  const LayerRun want = run_layer(out_of_place, in, x, {}, dy, Phase::kTrain);
  in_place.bind_params({}, {});
  in_place.prepare(plain_md(in), Phase::kTrain, true);
  std::vector<float> buf = x, grad = dy;
  memory act(plain_md(in), eng, buf.data()), diff(plain_md(in), eng, grad.data());
  in_place.forward(act, act, Phase::kTrain);
  in_place.backward(diff, diff);
  strm.wait();
  CHECK(buf == want.y);
  CHECK(grad == want.dx);
}
