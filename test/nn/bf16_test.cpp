// bf16 compute (--precision bf16): every layer kind in bf16 against the same layer in fp32
// on the same inputs, parameters and output gradients, and whole zoo models in bf16
// against fp32. bf16 keeps 8 significant bits (relative rounding 2^-9 ~ 0.002), products
// accumulate in fp32, so outputs and gradients agree to a few 1e-3 of their largest
// magnitude; the bound is 2e-2 of it. The tests also check that bf16 really ran: the
// layer's activations are bf16 and its outputs are not fp32's bit for bit.
// On a CPU where oneDNN has no bf16 at all (below AVX-512), they are skipped with a message.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>

#include "layer_harness.h"
#include "nn/BatchNorm2d.h"
#include "nn/Conv2d.h"
#include "nn/Dropout.h"
#include "nn/Flatten.h"
#include "nn/GlobalAvgPool2d.h"
#include "nn/Linear.h"
#include "nn/LocalResponseNorm.h"
#include "nn/Model.h"
#include "nn/Pool2d.h"
#include "nn/Precision.h"
#include "nn/ReLU.h"
#include "nn/ReLU6.h"

using namespace ringtrain;
using namespace ringtrain::test;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

namespace {

constexpr double kBf16Tol = 2e-2;

// oneDNN runs bf16 (natively or emulated) only from AVX-512 on.
bool bf16_available() {
  const auto isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core || isa == dnnl::cpu_isa::avx512_core_vnni ||
         isa_has_native_bf16(isa);
}

double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  return ringtrain::test::rel_error(a, to_double(b));
}

using MakeLayer = std::function<std::unique_ptr<Layer>()>;

struct Case {
  std::string what;
  MakeLayer make;
  Dims in;
  std::vector<std::vector<float>> params;
  tag src_tag = tag::undef;
  int buffers = 0;  // floats of non-trained state (BatchNorm: 2 C)
  bool rounds = true;  // bf16 output must differ from fp32 somewhere (false: exact ops)
};

// The layer in fp32 and in bf16 on the same data; returns both runs.
void compare(const Case& c) {
  INFO(c.what << " input " << dims_str(c.in));
  auto fp32 = c.make();
  auto bf16 = c.make();
  bf16->set_compute_type(dt::bf16);
  const Dims out = fp32->out_shape(c.in);
  const auto x = random_floats(numel(c.in), 3, -2.f, 2.f);
  const auto dy = random_floats(numel(out), 4);
  std::vector<float> buf32(c.buffers), buf16(c.buffers);
  for (auto* b : {&buf32, &buf16})
    for (int i = c.buffers / 2; i < c.buffers; ++i) (*b)[i] = 1.f;  // running variances 1
  const LayerRun a =
      run_layer(*fp32, c.in, x, c.params, dy, Phase::kTrain, c.src_tag, c.buffers ? buf32.data() : nullptr, 9);
  const LayerRun b =
      run_layer(*bf16, c.in, x, c.params, dy, Phase::kTrain, c.src_tag, c.buffers ? buf16.data() : nullptr, 9);
  CHECK(bf16->src_md().data_type() == dt::bf16);
  CHECK(bf16->dst_md().data_type() == dt::bf16);
  CHECK(bf16->diff_src_md().data_type() == dt::bf16);
  const double ey = rel_error(b.y, a.y), edx = rel_error(b.dx, a.dx);
  INFO("forward rel error " << ey << ", diff_src rel error " << edx);
  CHECK(ey < kBf16Tol);
  CHECK(edx < kBf16Tol);
  if (c.rounds) CHECK(b.y != a.y);
  REQUIRE(b.dparams.size() == a.dparams.size());
  for (std::size_t k = 0; k < a.dparams.size(); ++k) {
    const double ep = rel_error(b.dparams[k], a.dparams[k]);
    INFO("param " << k << " gradient rel error " << ep);
    CHECK(ep < kBf16Tol);
  }
  for (int i = 0; i < c.buffers; ++i) CHECK(buf16[i] == Approx(buf32[i]).margin(kBf16Tol));
}

// v rounded to the nearest bf16 (ties to even), as a float.
float bf16_rounded(float v) {
  std::uint32_t u = 0;
  std::memcpy(&u, &v, sizeof u);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// ||a - b|| / ||b||.
double rel_l2_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    diff += std::pow(static_cast<double>(a[i]) - b[i], 2);
    norm += std::pow(static_cast<double>(b[i]), 2);
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

// Mean train loss of the model's last backward batch (x, y), then after `steps` steps of
// plain SGD (lr 0.02) on it: (first, last). Expects forward + backward already done.
std::pair<double, double> sgd_losses(Model& m, const std::vector<float>& x, const std::vector<std::int32_t>& y,
                                     int steps) {
  const int n = static_cast<int>(y.size());
  const double first = m.forward(x.data(), y.data(), n, Phase::kTrain, 1).loss_sum / n;
  m.backward();
  double last = first;
  for (int s = 0; s < steps; ++s) {
    auto p = m.params();
    auto g = m.grads();
    for (std::size_t i = 0; i < p.size(); ++i) p[i] -= 0.02f * g[i];
    last = m.forward(x.data(), y.data(), n, Phase::kTrain, static_cast<std::uint64_t>(s) + 2).loss_sum / n;
    m.backward();
  }
  return {first, last};
}

std::vector<float> weights(std::size_t n, std::uint64_t seed) { return random_floats(n, seed, -0.5f, 0.5f); }

}  // namespace

TEST_CASE("Every layer kind in bf16 matches itself in fp32 within bf16 tolerance", "[nn][bf16]") {
  if (!bf16_available()) {
    WARN("skipped: oneDNN runs no bf16 on this CPU (ISA " << isa_name(dnnl::get_effective_cpu_isa()) << ")");
    return;
  }
  std::vector<Case> cases;
  for (auto [in_c, out_c, k, s, p, t, in] : {std::tuple{3, 8, 3, 1, 1, tag::undef, Dims{2, 3, 8, 8}},
                                             std::tuple{16, 16, 3, 2, 1, tag::nChw16c, Dims{2, 16, 9, 9}},
                                             std::tuple{6, 16, 5, 1, 0, tag::nChw16c, Dims{2, 6, 9, 9}}}) {
    cases.push_back({"conv2d", [=] { return std::make_unique<Conv2d>("conv", in_c, out_c, k, s, p, true); }, in,
                     {weights(out_c * in_c * k * k, 5), weights(out_c, 6)}, t});
  }
  // Depthwise (MobileNetV2) and grouped, dilated: 5-D weights, in the arena as (O, I/G, K, K).
  const Conv2d::Options dw{.in = 16, .out = 16, .kernel = 3, .stride = 2, .pad = 1, .groups = 16, .bias = false};
  cases.push_back({"depthwise conv2d", [=] { return std::make_unique<Conv2d>("dw", dw); }, {2, 16, 7, 7},
                   {weights(16 * 9, 12)}, tag::nChw16c});
  const Conv2d::Options grouped{.in = 8, .out = 12, .kernel = 3, .pad = 2, .dilation = 2, .groups = 4};
  cases.push_back({"grouped dilated conv2d", [=] { return std::make_unique<Conv2d>("g", grouped); }, {2, 8, 7, 6},
                   {weights(12 * 2 * 9, 13), weights(12, 14)}});
  cases.push_back({"linear", [] { return std::make_unique<Linear>("fc", 40, 24, true); }, {4, 40},
                   {weights(24 * 40, 7), weights(24, 8)}});
  cases.push_back({"relu", [] { return std::make_unique<ReLU>("relu"); }, {2, 16, 4, 4}, {}, tag::nChw16c});
  cases.push_back({"relu6", [] { return std::make_unique<ReLU6>("relu6"); }, {2, 16, 4, 4}, {}, tag::nChw16c});
  cases.push_back({"global avgpool", [] { return std::make_unique<GlobalAvgPool2d>("gap"); }, {2, 16, 5, 3}, {},
                   tag::nChw16c});
  cases.push_back({"maxpool", [] { return std::make_unique<Pool2d>("pool", Pool2d::Mode::kMax, 2, 2, 0); },
                   {2, 16, 6, 6}, {}, tag::nChw16c});
  cases.push_back({"avgpool", [] { return std::make_unique<Pool2d>("pool", Pool2d::Mode::kAvg, 3, 2, 1); },
                   {2, 4, 7, 7}, {}});
  cases.push_back({"lrn", [] { return std::make_unique<LocalResponseNorm>("lrn", 5, 1e-1f, 0.75f, 2.f); },
                   {2, 16, 3, 3}, {}, tag::nChw16c});
  cases.push_back({"batchnorm", [] { return std::make_unique<BatchNorm2d>("bn", 16); }, {4, 16, 3, 3},
                   {random_floats(16, 10, 0.5f, 1.5f), random_floats(16, 11)}, tag::nChw16c, 32});
  cases.push_back({"dropout", [] { return std::make_unique<Dropout>("drop", 0.3f); }, {8, 64}, {}});
  cases.push_back({"flatten", [] { return std::make_unique<Flatten>("flatten"); }, {2, 3, 4, 4}, {}});
  for (const auto& c : cases) compare(c);
}

TEST_CASE("bf16 zoo models: logits and gradients near fp32's, fp32 arenas, a loss that falls", "[nn][bf16]") {
  if (!bf16_available()) {
    WARN("skipped: oneDNN runs no bf16 on this CPU (ISA " << isa_name(dnnl::get_effective_cpu_isa()) << ")");
    return;
  }
  struct Cfg {
    std::string name;
    ImageShape shape;
  };
  for (const auto& c : std::vector<Cfg>{{"logreg", {1, 28, 28}},
                                        {"lenet5", {1, 28, 28}},
                                        {"mlp", {3, 16, 16}},
                                        {"svhn-cnn", {3, 32, 32}},
                                        {"alexnet", {3, 16, 16}},
                                        {"vgg11", {3, 32, 32}},
                                        {"resnet20", {3, 16, 16}},  // graphs: Add (+ ReLU) and fan-out sums
                                        {"mobilenetv2", {3, 32, 32}}}) {
    INFO(c.name);
    const int n = 8;
    const auto x = random_floats(c.shape.numel() * n, 21);
    std::vector<std::int32_t> y(n);
    for (int i = 0; i < n; ++i) y[i] = i % 10;
    Model a(c.name, c.shape, 10), b(c.name, c.shape, 10);
    a.init(3);
    b.init(3);
    b.set_precision(Precision::kBf16);
    CHECK(b.precision() == Precision::kBf16);
    const auto ra = a.forward(x.data(), y.data(), n, Phase::kTrain, 1);
    a.backward();
    const auto rb = b.forward(x.data(), y.data(), n, Phase::kTrain, 1);
    b.backward();
    const std::vector<float> la(a.logits().begin(), a.logits().end()), lb(b.logits().begin(), b.logits().end());
    const std::vector<float> ga(a.grads().begin(), a.grads().end()), gb(b.grads().begin(), b.grads().end());
    // The gradient as a whole (relative L2 error), against how much the model's gradient
    // moves in fp32 when only its weights are rounded to bf16: a ReLU input or a max-pool
    // tie that rounding moves routes a sample's gradient elsewhere (one such flip in a
    // 32-wide layer at batch 8 moves its weight gradient ~6%), and BatchNorm over few
    // values amplifies (VGG-11 at batch 8: 18% from rounded weights alone). Observed ratio
    // bf16 / rounded weights: 1.1-3.5 (10 for logreg, linear, where rounding barely moves
    // it: hence the floor); a wrong gradient would be >= 1.
    Model r(c.name, c.shape, 10);
    r.init(3);
    for (auto& w : r.params()) w = bf16_rounded(w);
    const auto rr = r.forward(x.data(), y.data(), n, Phase::kTrain, 1);
    r.backward();
    const std::vector<float> lr(r.logits().begin(), r.logits().end());
    const std::vector<float> gr(r.grads().begin(), r.grads().end());
    const double round_logits = rel_error(lr, la), round_grads = rel_l2_error(gr, ga);
    INFO("loss fp32 " << ra.loss_sum / n << " bf16 " << rb.loss_sum / n << " (fp32 with bf16-rounded weights "
                      << rr.loss_sum / n << "), logits rel error " << rel_error(lb, la) << " (rounded weights "
                      << round_logits << "), gradient rel L2 error " << rel_l2_error(gb, ga)
                      << " (rounded weights " << round_grads << ")");
    if (round_logits < 0.05) {
      // Well-conditioned at this init (rounded weights move the logits 0.1-1.1%): bf16
      // stays near fp32 in absolute terms.
      CHECK(rb.loss_sum == Approx(ra.loss_sum).epsilon(0.02));
      CHECK(rel_error(lb, la) < 0.05);
      CHECK(rel_l2_error(gb, ga) < std::clamp(5 * round_grads, 0.01, 0.5));
    } else {
      // Chaotic at this init: mobilenetv2 (52 layers, batch norm over 8 values at 1x1 in its
      // last stage) moves its logits by 51% and its gradient by 138% in fp32 from rounding
      // its weights alone (at 128x128 still 10% and 85%), so no bf16 run can be near fp32
      // there, and a whole-model comparison cannot tell a wrong gradient from the chaos.
      // It is held to the scale of that chaos (measured bf16 / rounded: logits 1.6-1.7,
      // gradient 0.94-1.01) and its loss to 5% of fp32's (measured 1.1-2.3% at 1 and 2
      // threads; rounding the weights alone moves it 6e-5, the activations' bf16 more).
      // Its layers (depthwise conv, ReLU6, global pooling, batch norm) are checked one by
      // one above, and the training check below must pass.
      CHECK(rb.loss_sum == Approx(ra.loss_sum).epsilon(0.05));
      CHECK(rel_error(lb, la) < 3 * round_logits);
      CHECK(rel_l2_error(gb, ga) < 3 * round_grads);
    }
    CHECK(lb != la);  // bf16 really ran

    // Training in bf16: plain SGD on the batch lowers the loss as fp32's does.
    const auto [first32, last32] = sgd_losses(a, x, y, 30);
    const auto [first16, last16] = sgd_losses(b, x, y, 30);
    INFO("train loss over 30 SGD steps: fp32 " << first32 << " -> " << last32 << ", bf16 " << first16 << " -> "
                                               << last16);
    CHECK(first16 - last16 > 0.7 * (first32 - last32));
  }
}

TEST_CASE("set_precision switches back and forth; fp32 after bf16 gives fp32's bits again", "[nn][bf16]") {
  if (!bf16_available()) {
    WARN("skipped: oneDNN runs no bf16 on this CPU");
    return;
  }
  Model m("lenet5", {1, 28, 28}, 10);
  m.init(4);
  const int n = 4;
  const auto x = random_floats(28 * 28 * n, 5);
  const std::vector<std::int32_t> y{1, 2, 3, 4};
  const double fp32 = m.forward(x.data(), y.data(), n, Phase::kEval).loss_sum;
  m.set_precision(Precision::kBf16);
  const double bf16 = m.forward(x.data(), y.data(), n, Phase::kEval).loss_sum;
  m.set_precision(Precision::kFp32);
  CHECK(m.forward(x.data(), y.data(), n, Phase::kEval).loss_sum == fp32);
  CHECK(bf16 != fp32);
}

TEST_CASE("Precision names, and bf16 refused on a CPU without native bf16", "[nn][bf16]") {
  CHECK(parse_precision("fp32") == Precision::kFp32);
  CHECK(parse_precision("bf16") == Precision::kBf16);
  CHECK(precision_name(Precision::kBf16) == "bf16");
  CHECK_THROWS_WITH(parse_precision("fp16"), Catch::Contains("fp16") && Catch::Contains("fp32 or bf16"));
  using I = dnnl::cpu_isa;
  for (I isa : {I::avx512_core_bf16, I::avx512_core_amx}) {
    CHECK(isa_has_native_bf16(isa));
    CHECK(precision_refusal(Precision::kBf16, isa).empty());
  }
  for (I isa : {I::sse41, I::avx2, I::avx2_vnni, I::avx512_core, I::avx512_core_vnni}) {
    INFO(isa_name(isa));
    CHECK_FALSE(isa_has_native_bf16(isa));
    CHECK(precision_refusal(Precision::kFp32, isa).empty());
    const std::string why = precision_refusal(Precision::kBf16, isa);
    CHECK_THAT(why, Catch::Contains(std::string(isa_name(isa))) && Catch::Contains("--precision bf16"));
    CHECK(why.find('\n') == std::string::npos);
  }
  CHECK(isa_name(I::avx512_core_vnni) == "avx512_core_vnni");
}
