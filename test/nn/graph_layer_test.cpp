// ReLU6 and GlobalAvgPool2d, single-input layers the graph models (MobileNetV2, ResNets)
// add, against naive double references and their central differences (layer_harness.h):
// ReLU6 across both kinks and exactly at them, in place; global average pooling over 1x1,
// 7x7 and non-square inputs, plain and blocked, one layer across input sizes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "layer_harness.h"
#include "nn/GlobalAvgPool2d.h"
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

// Mean over each (n, c) plane of H x W.
RefForward gap_ref(const Dims& in) {
  return [=](const Vec& x, const std::vector<Vec>&) {
    const auto NC = in[0] * in[1], HW = in[2] * in[3];
    Vec y(NC, 0.0);
    for (int64_t nc = 0; nc < NC; ++nc) {
      for (int64_t i = 0; i < HW; ++i) y[nc] += x[nc * HW + i];
      y[nc] /= static_cast<double>(HW);
    }
    return y;
  };
}

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

TEST_CASE("GlobalAvgPool2d matches the plane means and their central differences", "[nn][layer]") {
  for (auto [in, t] : {std::pair<Dims, tag>{{2, 3, 1, 1}, tag::undef},
                       {{2, 3, 7, 7}, tag::undef},
                       {{3, 4, 3, 5}, tag::undef},
                       {{2, 5, 1, 4}, tag::undef},
                       {{2, 16, 7, 7}, tag::nChw16c},
                       {{2, 16, 2, 3}, tag::nChw16c}}) {
    GlobalAvgPool2d gap("gap");
    CHECK(gap.out_shape(in) == Dims{in[0], in[1], 1, 1});
    check_layer(gap, in, gap_ref(in), {}, t);
  }
}

TEST_CASE("One GlobalAvgPool2d takes inputs of several sizes, each with its own window", "[nn][layer]") {
  using dnnl::memory;
  auto& eng = DnnlContext::get().engine();
  auto& strm = DnnlContext::get().stream();
  GlobalAvgPool2d gap("gap");
  gap.bind_params({}, {});
  // Bound once: going back to 7x7 takes the state prepared first.
  for (const Dims& in : {Dims{2, 3, 7, 7}, Dims{2, 3, 3, 5}, Dims{2, 3, 1, 1}, Dims{2, 3, 7, 7}}) {
    INFO("input " << dims_str(in));
    auto x = random_floats(numel(in), 8);
    std::vector<float> y(numel(gap.out_shape(in)));
    gap.prepare(plain_md(in), Phase::kEval, true);
    memory x_user(plain_md(in), eng, x.data()), y_user(plain_md(gap.out_shape(in)), eng, y.data());
    memory src(gap.src_md(), eng), dst(gap.dst_md(), eng);
    dnnl::reorder(x_user, src).execute(strm, x_user, src);
    gap.forward(src, dst, Phase::kEval);
    dnnl::reorder(dst, y_user).execute(strm, dst, y_user);
    strm.wait();
    CHECK(rel_error(y, gap_ref(in)(to_double(x), {})) < kForwardTol);
  }
  CHECK_THROWS_AS(gap.out_shape({2, 3, 4}), std::invalid_argument);
  CHECK_THROWS_AS(gap.out_shape({2, 3, 0, 4}), std::invalid_argument);
  CHECK(gap.kind() == "globalavgpool2d");
  CHECK(gap.param_specs().empty());
}
