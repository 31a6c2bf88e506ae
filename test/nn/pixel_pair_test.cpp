// nn/PixelPairConv's passes against a 3x3 convolution and its exact gradients written here in
// double (conv3x3_reference.h), on 2x2, 1x1, 1x2 and 2x1 images, with bias and ReLU, and close
// at any thread count; and Conv2d on it: which layers take it, the same checks through the
// layer, weights turned again exactly when the parameters change, and what a step converts.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <omp.h>

#include "conv3x3_reference.h"
#include "layer_harness.h"
#include "nn/Conv2d.h"
#include "nn/ParamsVersion.h"
#include "nn/PixelPairConv.h"
#include "nn/Precision.h"

using namespace ringtrain;
using namespace ringtrain::test;
using dnnl::memory;
using tag = memory::format_tag;

namespace {

// max |error| / max |reference| allowed: plain fp32 sums of 64-80 channels x at most 4 pixels
// (the Winograd tests' bound, whose transforms scale by up to 8).
constexpr double kPairTol = 1e-5;

// Conv2d takes nn/PixelPairConv on this CPU and in this process.
bool pairs_expected() {
  const dnnl::cpu_isa isa = effective_isa();
  const char* off = std::getenv("RINGTRAIN_CONV_PAIRS");
  using I = dnnl::cpu_isa;
  const bool isa_ok = isa == I::avx2 || isa == I::avx2_vnni || isa == I::avx512_core || isa == I::avx512_core_vnni ||
                      isa == I::avx512_core_bf16 || isa == I::avx512_core_amx;
  return isa_ok && !(off && std::string(off) == "0");
}

// The taps no pixel pair reaches (all but the centre on a 1x1 image; a border row or column on
// 1x2 and 2x1) must get exactly zero gradients, not left-overs of earlier data.
void check_pair_kernel(const pixelpair::Shape& s, bool bias, bool relu) {
  check_own_kernel<pixelpair::Conv3x3, pixelpair::Weights>(s, bias, relu, kPairTol, 41, /*zero_taps=*/true);
}

}  // namespace

TEST_CASE("PixelPairConv: forward, backward-data and backward-weights against double", "[nn][pixelpair]") {
  check_pair_kernel({2, 64, 72, 2, 2}, true, false);
  check_pair_kernel({3, 72, 64, 2, 2}, false, true);
  check_pair_kernel({2, 64, 64, 1, 1}, true, true);
  check_pair_kernel({2, 64, 80, 1, 2}, false, false);
  check_pair_kernel({1, 80, 64, 2, 1}, true, false);
}

TEST_CASE("PixelPairConv: one and two threads agree to the kernels' bound", "[nn][pixelpair]") {
  const pixelpair::Shape s{8, 128, 64, 2, 2};
  const auto x = random_floats(static_cast<std::size_t>(s.batch * s.in * 4), 51);
  const auto dy = random_floats(static_cast<std::size_t>(s.batch * s.out * 4), 52);
  const auto w = random_floats(static_cast<std::size_t>(s.out * s.in * 9), 53);
  const auto b = random_floats(static_cast<std::size_t>(s.out), 54);
  pixelpair::Weights weights(s.in, s.out);
  const pixelpair::Conv3x3 conv(s);
  auto run = [&](int threads) {
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    weights.set(w.data());
    std::vector<float> y(dy.size()), dx(x.size()), dw(w.size()), db(b.size());
    conv.forward(weights, x.data(), y.data(), b.data(), false);
    conv.backward_data(weights, dy.data(), dx.data());
    conv.backward_weights(x.data(), dy.data(), dw.data(), db.data());
    omp_set_num_threads(before);
    return std::vector<std::vector<float>>{y, dx, dw, db};
  };
  const auto one = run(1), two = run(2);
  for (std::size_t i = 0; i < one.size(); ++i) {
    INFO("result " << i << " (y, dx, dw, db)");
    // The products are oneDNN's sgemm, which may sum in another order on two threads; the
    // conversions around them and the bias gradient (one thread, in double) are ringtrain's.
    if (i == 3)
      CHECK(std::memcmp(one[i].data(), two[i].data(), one[i].size() * sizeof(float)) == 0);
    else
      CHECK(rel_error(two[i], Vec(one[i].begin(), one[i].end())) < kPairTol);
  }
}

TEST_CASE("PixelPairConv: rejects shapes it cannot take", "[nn][pixelpair]") {
  CHECK_THROWS_AS(pixelpair::Conv3x3({1, 64, 64, 3, 2}), std::invalid_argument);  // 3 rows
  CHECK_THROWS_AS(pixelpair::Conv3x3({1, 60, 64, 2, 2}), std::invalid_argument);  // not whole nChw8c blocks
  CHECK_THROWS_AS(pixelpair::Conv3x3({0, 64, 64, 2, 2}), std::invalid_argument);
  CHECK_THROWS_AS(pixelpair::Weights(0, 64), std::invalid_argument);
  CHECK(pixelpair::applies(512, 512, 3, 1, 1, 1, 1, 2, 2));
  CHECK(pixelpair::applies(64, 128, 3, 1, 1, 1, 1, 1, 1));
  CHECK_FALSE(pixelpair::applies(32, 64, 3, 1, 1, 1, 1, 2, 2));    // too thin
  CHECK_FALSE(pixelpair::applies(64, 64, 3, 1, 1, 1, 1, 3, 3));    // 3x3 image: Winograd's
  CHECK_FALSE(pixelpair::applies(64, 64, 3, 2, 1, 1, 1, 2, 2));    // stride 2
  CHECK_FALSE(pixelpair::applies(64, 64, 3, 1, 2, 2, 1, 2, 2));    // dilated
  CHECK_FALSE(pixelpair::applies(64, 64, 3, 1, 1, 1, 2, 2, 2));    // grouped
  CHECK_FALSE(pixelpair::applies(64, 64, 1, 1, 0, 1, 1, 2, 2));    // 1x1 kernel
  CHECK_FALSE(pixelpair::applies(72, 68, 3, 1, 1, 1, 1, 2, 2));    // 68 channels
}

TEST_CASE("Conv2d runs fp32 3x3 layers of 64+ channels on images of at most 2x2 on pixel pairs on AVX2 and AVX-512, "
          "with exact gradients, and turns the weights once per parameter change",
          "[nn][pixelpair]") {
  const bool expected = pairs_expected();
  // 32 images of 2x2: 128 output pixels, below Winograd's 256, as vgg11's last layers at batch 32.
  const pixelpair::Shape s{32, 64, 72, 2, 2};
  const Dims in{s.batch, s.in, s.height, s.width};
  Conv2d conv("conv", {.in = 64, .out = 72, .kernel = 3, .stride = 1, .pad = 1, .bias = true});
  std::vector<std::vector<float>> params{random_floats(static_cast<std::size_t>(72 * 64 * 9), 61),
                                         random_floats(72, 62)};
  const auto x = random_floats(static_cast<std::size_t>(numel(in)), 63);
  const auto dy = random_floats(static_cast<std::size_t>(numel(conv.out_shape(in))), 64);
  const LayerRun got = run_layer(conv, in, x, params, dy, Phase::kTrain);
  CHECK(conv.pixel_pairs() == expected);
  CHECK_FALSE(conv.winograd());
  if (expected) {
    // In training: the weights turned in, the gradient turned back.
    CHECK(conv.step_reorders().weights == 2);
    CHECK(conv.state_bytes() == pixelpair::Weights(64, 72).bytes());
    CHECK(conv.state_bytes() >= std::size_t{9} * 64 * 72 * sizeof(float));
  }
  const Conv3x3Ref want = conv3x3_reference(s, to_double(x), to_double(params[0]), to_double(params[1]), to_double(dy));
  INFO("relative errors: forward " << rel_error(got.y, want.y) << ", diff_src " << rel_error(got.dx, want.dx)
                                   << ", diff_weights " << rel_error(got.dparams[0], want.dw));
  CHECK(rel_error(got.y, want.y) < kPairTol);
  CHECK(rel_error(got.dx, want.dx) < kPairTol);
  CHECK(rel_error(got.dparams[0], want.dw) < kPairTol);
  CHECK(rel_error(got.dparams[1], want.db) < 1e-6);

  // Not on pixel pairs: a 4x4 image (Winograd's when worthwhile, else oneDNN's); 32 channels.
  Conv2d wider("wider", {.in = 64, .out = 64, .kernel = 3, .pad = 1});
  run_layer(wider, {1, 64, 4, 4}, random_floats(64 * 16, 1), {random_floats(64 * 64 * 9, 2), random_floats(64, 3)},
            {}, Phase::kEval);
  CHECK_FALSE(wider.pixel_pairs());
  Conv2d thin("thin", {.in = 32, .out = 64, .kernel = 3, .pad = 1});
  run_layer(thin, {1, 32, 2, 2}, random_floats(32 * 4, 4), {random_floats(64 * 32 * 9, 5), random_floats(64, 6)}, {},
            Phase::kEval);
  CHECK_FALSE(thin.pixel_pairs());

  if (!expected) return;
  Conv2d one("one", {.in = 64, .out = 64, .kernel = 3, .pad = 1, .bias = false});
  check_converts_once(one, {4, 64, 1, 1}, &Conv2d::pixel_pairs, kPairTol);
}
