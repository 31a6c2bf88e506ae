// Conv2d's generalisations (dilation, groups, depthwise, channel multipliers, no bias)
// against a naive double convolution written here, and its central differences (the
// gradient check of layer_harness.h); the hyper-parameters' bookkeeping (parameter counts,
// fan-in, flops, signatures); the dense constructor against the options one, bit for bit; and
// where backward-data's blocked weights are reordered from.
#include <cstdint>
#include <memory>
#include <stdexcept>

#include <catch2/catch.hpp>

#include "layer_harness.h"
#include "nn/Conv2d.h"
#include "nn/ParamsVersion.h"
#include "nn/WeightCopy.h"

using namespace ringtrain;
using namespace ringtrain::test;
using tag = dnnl::memory::format_tag;
using Options = Conv2d::Options;

namespace {

// y[n,o,i,j] = b[o] + sum_{c in group(o), u, v} w[o, c - c0, u, v] x[n, c, i*s - p + u*d, j*s - p + v*d],
// where group(o) = o / (O / G) covers input channels [c0, c0 + C / G), c0 = group(o) * C / G.
RefForward conv_ref(const Dims& in, const Options& o) {
  return [=](const Vec& x, const std::vector<Vec>& prm) {
    const auto N = in[0], C = in[1], H = in[2], W = in[3];
    const int k = o.kernel, s = o.stride, p = o.pad, d = o.dilation;
    const int64_t span = d * (k - 1) + 1;
    const auto OH = (H + 2 * p - span) / s + 1, OW = (W + 2 * p - span) / s + 1;
    const int64_t cg = C / o.groups, og = o.out / o.groups;
    Vec y(N * o.out * OH * OW);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t oc = 0; oc < o.out; ++oc)
        for (int64_t i = 0; i < OH; ++i)
          for (int64_t j = 0; j < OW; ++j) {
            double acc = o.bias ? prm[1][oc] : 0.0;
            const int64_t c0 = oc / og * cg;
            for (int64_t c = 0; c < cg; ++c)
              for (int u = 0; u < k; ++u)
                for (int v = 0; v < k; ++v) {
                  const int64_t h = i * s - p + u * d, w = j * s - p + v * d;
                  if (h < 0 || h >= H || w < 0 || w >= W) continue;
                  acc += prm[0][((oc * cg + c) * k + u) * k + v] * x[((n * C + c0 + c) * H + h) * W + w];
                }
            y[((n * o.out + oc) * OH + i) * OW + j] = acc;
          }
    return y;
  };
}

std::vector<std::vector<float>> conv_params(const Options& o, std::uint64_t seed) {
  std::vector<std::vector<float>> p{
      random_floats(static_cast<std::size_t>(o.out) * (o.in / o.groups) * o.kernel * o.kernel, seed)};
  if (o.bias) p.push_back(random_floats(o.out, seed + 1));
  return p;
}

}  // namespace

TEST_CASE("Conv2d with dilation and groups matches the naive convolution and its central differences",
          "[nn][layer]") {
  struct Cfg {
    std::string what;
    Options o;
    Dims in;
    tag t;
  };
  const std::vector<Cfg> cfgs{
      {"dilation 2, odd sizes", {.in = 3, .out = 4, .kernel = 3, .pad = 2, .dilation = 2}, {2, 3, 9, 7}, tag::undef},
      {"dilation 2, stride 2, no bias",
       {.in = 3, .out = 5, .kernel = 3, .stride = 2, .pad = 1, .dilation = 2, .bias = false},
       {2, 3, 9, 8},
       tag::undef},
      {"groups 1 without bias (ResNet)",
       {.in = 5, .out = 6, .kernel = 3, .stride = 2, .pad = 1, .bias = false},
       {2, 5, 7, 7},
       tag::undef},
      {"groups 2, stride 2, no bias",
       {.in = 4, .out = 6, .kernel = 3, .stride = 2, .pad = 1, .groups = 2, .bias = false},
       {2, 4, 7, 9},
       tag::undef},
      {"groups 2 with bias", {.in = 6, .out = 4, .kernel = 3, .pad = 1, .groups = 2}, {2, 6, 5, 5}, tag::undef},
      {"depthwise, blocked input (MobileNetV2)",
       {.in = 16, .out = 16, .kernel = 3, .pad = 1, .groups = 16, .bias = false},
       {2, 16, 5, 5},
       tag::nChw16c},
      {"depthwise, stride 2, odd size, bias",
       {.in = 8, .out = 8, .kernel = 3, .stride = 2, .pad = 1, .groups = 8},
       {2, 8, 7, 7},
       tag::undef},
      {"depthwise, dilation 2, blocked",
       {.in = 16, .out = 16, .kernel = 3, .pad = 2, .dilation = 2, .groups = 16},
       {2, 16, 7, 6},
       tag::nChw16c},
      {"channel multiplier 2",
       {.in = 4, .out = 8, .kernel = 3, .pad = 1, .groups = 4, .bias = false},
       {2, 4, 5, 6},
       tag::undef},
      {"1x1 stride 2 projection, no bias",
       {.in = 8, .out = 16, .kernel = 1, .stride = 2, .bias = false},
       {2, 8, 7, 7},
       tag::undef},
  };
  for (const auto& c : cfgs) {
    INFO(c.what);
    Conv2d conv("conv", c.o);
    check_layer(conv, c.in, conv_ref(c.in, c.o), conv_params(c.o, 5), c.t);
  }
}

TEST_CASE("Conv2d options: torchvision's parameter counts, fan-in, flops and signatures", "[nn][layer]") {
  auto count = [](const Conv2d& c) {
    std::int64_t n = 0;
    for (const auto& spec : c.param_specs()) n += static_cast<std::int64_t>(numel(spec.dims));
    return n;
  };
  // torchvision resnet18's stem, a MobileNetV2 depthwise 3x3 and a grouped 3x3 (ResNeXt-like).
  const Conv2d stem("stem", {.in = 3, .out = 64, .kernel = 7, .stride = 2, .pad = 3, .bias = false});
  const Conv2d dw("dw", {.in = 32, .out = 32, .kernel = 3, .pad = 1, .groups = 32, .bias = false});
  const Conv2d grouped("g", {.in = 8, .out = 12, .kernel = 3, .pad = 2, .dilation = 2, .groups = 4});
  CHECK(count(stem) == 9408);
  CHECK(count(dw) == 288);
  CHECK(count(grouped) == 12 * 2 * 9 + 12);
  REQUIRE(dw.param_specs().size() == 1);
  CHECK(dw.param_specs()[0].dims == Dims{32, 1, 3, 3});
  CHECK(dw.param_specs()[0].fan_in == 9);
  REQUIRE(grouped.param_specs().size() == 2);
  CHECK(grouped.param_specs()[0].dims == Dims{12, 2, 3, 3});
  CHECK(grouped.param_specs()[0].fan_in == 18);
  CHECK(grouped.param_specs()[1].kind == ParamKind::kBias);

  CHECK(stem.out_shape({1, 3, 224, 224}) == Dims{1, 64, 112, 112});
  CHECK(grouped.out_shape({1, 8, 9, 7}) == Dims{1, 12, 9, 7});  // dilation 2, pad 2: same size
  // 2 x outputs x (in / groups) x k^2
  CHECK(stem.flops_per_image({1, 3, 224, 224}) == 2.0 * 64 * 112 * 112 * 3 * 49);
  CHECK(dw.flops_per_image({1, 32, 8, 8}) == 2.0 * 32 * 8 * 8 * 9);
  CHECK(grouped.flops_per_image({1, 8, 9, 7}) == 2.0 * 12 * 9 * 7 * 2 * 9);

  CHECK(stem.describe() == "conv2d(in=3,out=64,k=7,s=2,p=3,bias=0)");
  CHECK(dw.describe() == "conv2d(in=32,out=32,k=3,s=1,p=1,g=32,bias=0)");
  CHECK(grouped.describe() == "conv2d(in=8,out=12,k=3,s=1,p=2,d=2,g=4,bias=1)");
  CHECK(Conv2d("c", 3, 4, 5, 2, 1, true).describe() == "conv2d(in=3,out=4,k=5,s=2,p=1,bias=1)");
  CHECK(grouped.groups() == 4);
  CHECK(grouped.dilation() == 2);

  CHECK_THROWS_AS(Conv2d("c", {.in = 6, .out = 4, .kernel = 3, .groups = 4}), std::invalid_argument);
  CHECK_THROWS_AS(Conv2d("c", {.in = 4, .out = 6, .kernel = 3, .groups = 4}), std::invalid_argument);
  CHECK_THROWS_AS(Conv2d("c", {.in = 4, .out = 4, .kernel = 3, .groups = 0}), std::invalid_argument);
  CHECK_THROWS_AS(Conv2d("c", {.in = 4, .out = 4, .kernel = 3, .dilation = 0}), std::invalid_argument);
  // A 3x3 kernel at dilation 3 spans 7 pixels: a 6x6 input is too small.
  CHECK_THROWS_AS(Conv2d("c", {.in = 1, .out = 1, .kernel = 3, .dilation = 3}).out_shape({1, 1, 6, 6}),
                  std::invalid_argument);
  CHECK(Conv2d("c", {.in = 1, .out = 1, .kernel = 3, .dilation = 3}).out_shape({1, 1, 7, 8}) == Dims{1, 1, 1, 2});
}

TEST_CASE("The dense constructor and the options with dilation 1, groups 1 give the same bits", "[nn][layer]") {
  const Dims in{2, 16, 6, 6};
  const Options o{.in = 16, .out = 8, .kernel = 3, .stride = 1, .pad = 1};
  const auto params = conv_params(o, 11);
  const auto x = random_floats(numel(in), 12);
  Conv2d dense("conv", 16, 8, 3, 1, 1, true), opts("conv", o);
  REQUIRE(dense.describe() == opts.describe());
  const auto dy = random_floats(numel(dense.out_shape(in)), 13);
  const LayerRun a = run_layer(dense, in, x, params, dy, Phase::kTrain, tag::nChw16c);
  const LayerRun b = run_layer(opts, in, x, params, dy, Phase::kTrain, tag::nChw16c);
  CHECK(a.y == b.y);
  CHECK(a.dx == b.dx);
  CHECK(a.dparams == b.dparams);
}

namespace {

// A layer with one 16x16x3x3 weight that lets the test ask Layer::weight_copy for copies.
class WeightCopyProbe : public Layer {
 public:
  WeightCopyProbe() : Layer("probe") {}
  std::string kind() const override { return "probe"; }
  std::string describe() const override { return "probe"; }
  Dims out_shape(const Dims& in) const override { return in; }
  std::vector<ParamSpec> param_specs() const override { return {{"weight", {16, 16, 3, 3}, ParamKind::kWeight, 144}}; }
  using Layer::weight_copy;

 protected:
  std::unique_ptr<State> build(const dnnl::memory::desc&, Phase, bool) override {
    throw std::logic_error("probe: never prepared");
  }
  void run_forward(State&, const dnnl::memory&, const dnnl::memory&, std::uint64_t) override {}
  void run_backward(State&, const dnnl::memory&, const dnnl::memory&) override {}
};

}  // namespace

TEST_CASE("fp32 backward-data weights are reordered from the forward's blocked copy, same bits as from the arena",
          "[nn][layer]") {
  // oneDNN's fp32 forward and backward-data want different blocked weights for a 16 -> 16 3x3
  // convolution (ABcd8b8a and ABcd8a8b on AVX2, 16-blocked on AVX-512).
  using dnnl::memory;
  auto& eng = DnnlContext::get().engine();
  const auto f32 = memory::data_type::f32;
  const memory::dims wd{16, 16, 3, 3};
  const ConvPds pds = conv3x3_forward_and_backward_data(f32, 2, 16, 8);
  const auto& fwd_pd = pds.fwd;
  const auto& bwd_pd = pds.bwd_data;
  REQUIRE(fwd_pd.weights_desc() != bwd_pd.weights_desc());

  std::vector<float> w = random_floats(16 * 16 * 9, 21), g(w.size());
  ParamsVersion version;
  WeightCopyProbe probe;
  probe.bind_params({Tensor::view(w.data(), {16, 16, 3, 3})}, {Tensor::view(g.data(), {16, 16, 3, 3})}, &version);
  const auto forward = probe.weight_copy(0, fwd_pd.weights_desc());
  const auto backward = probe.weight_copy(0, bwd_pd.weights_desc(), forward);
  REQUIRE(forward->reorders());
  CHECK(backward->source() == forward.get());
  // A plain copy is the arena itself: a copy derived from it reads the arena directly.
  const auto plain = probe.weight_copy(0, plain_md({16, 16, 3, 3}));
  CHECK_FALSE(plain->reorders());
  CHECK(probe.weight_copy(0, memory::desc(wd, f32, tag::acdb), plain)->source() == nullptr);

  WeightCopy direct(memory(plain_md({16, 16, 3, 3}), eng, w.data()), bwd_pd.weights_desc());
  const auto bytes = [](const WeightCopy& c) {
    const auto* p = static_cast<const std::uint8_t*>(c.get().get_data_handle());
    return std::vector<std::uint8_t>(p, p + c.get().get_desc().get_size());
  };
  for (int update = 0; update < 2; ++update) {
    backward->refresh(version);  // refreshes the forward's copy first
    direct.refresh(version);
    CHECK(forward->conversions() == static_cast<std::uint64_t>(update + 1));
    CHECK(bytes(*backward) == bytes(direct));
    for (auto& v : w) v = -v * 0.5f;
    ++version.value;
  }
}
