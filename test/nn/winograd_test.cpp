// nn/Winograd's F(4x4, 3x3) passes against a 3x3 convolution and its exact gradients written
// here in double (a linear map: its adjoints are exact, no differences needed), on sizes that
// are not multiples of the tile, with bias and ReLU, over several tile chunks, with the same bits
// at any thread count; and Conv2d on
// it: which layers take it, the same checks through the layer, and weights transformed again
// exactly when the parameters change.
#include <algorithm>
#include <cmath>
#include <cstdint>
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
#include "nn/Precision.h"
#include "nn/Winograd.h"

using namespace ringtrain;
using namespace ringtrain::test;
using dnnl::memory;
using tag = memory::format_tag;

namespace {

// max |error| / max |reference| allowed: F(4x4, 3x3) in fp32 landed up to 4.3e-6 from double on
// these shapes (its transforms scale by up to 8 and 1/24), the layer tests' forward bound.
constexpr double kTol = 1e-5;

void check_kernel(const winograd::Shape& s, bool bias, bool relu) {
  check_own_kernel<winograd::Conv3x3, winograd::Weights>(s, bias, relu, kTol, 11);
}

}  // namespace

TEST_CASE("Winograd F(4x4, 3x3): forward, backward-data and backward-weights against double", "[nn][winograd]") {
  // Sides that are not multiples of 4 (partial tiles at the borders), a 1x1 image (one tile,
  // mostly padding), unequal channel counts both ways.
  check_kernel({2, 8, 16, 7, 5}, true, false);
  check_kernel({1, 16, 8, 1, 1}, false, false);
  check_kernel({3, 8, 8, 4, 13}, false, true);
  check_kernel({2, 24, 16, 9, 6}, true, true);
}

TEST_CASE("Winograd: a tensor of several tile chunks or blocks sums them exactly as one", "[nn][winograd]") {
  // Narrow (at most 32 channels, tile group by tile group): 2 x 20 x 20 tiles of 8 + 8
  // channels, more than one block of backward-weights' partial sums.
  check_kernel({2, 8, 8, 80, 80}, true, false);
  // Wide (through the sgemms): 2 x 18 x 18 tiles of 40 + 40 channels, two chunks in every pass.
  check_kernel({2, 40, 40, 72, 72}, false, true);
}

TEST_CASE("Winograd: the same bits for any thread count", "[nn][winograd]") {
  // Narrow and wide layers, backward-weights over several blocks or chunks.
  for (const winograd::Shape& s : {winograd::Shape{2, 16, 24, 40, 40}, winograd::Shape{2, 40, 40, 72, 72}}) {
    const auto x = random_floats(static_cast<std::size_t>(s.batch * s.in * s.height * s.width), 31);
    const auto dy = random_floats(static_cast<std::size_t>(s.batch * s.out * s.height * s.width), 32);
    const auto w = random_floats(static_cast<std::size_t>(s.out * s.in * 9), 33);
    winograd::Weights weights(s.in, s.out);
    weights.set(w.data());
    const winograd::Conv3x3 conv(s);
    auto run = [&](int threads) {
      const int before = omp_get_max_threads();
      omp_set_num_threads(threads);
      std::vector<float> y(dy.size()), dx(x.size()), dw(w.size());
      conv.forward(weights, x.data(), y.data(), nullptr, false);
      conv.backward_data(weights, dy.data(), dx.data());
      conv.backward_weights(x.data(), dy.data(), dw.data(), nullptr);
      omp_set_num_threads(before);
      return std::vector<std::vector<float>>{y, dx, dw};
    };
    const auto one = run(1), two = run(2);
    for (std::size_t i = 0; i < one.size(); ++i) {
      INFO("shape " << s.in << " -> " << s.out << ", result " << i << " (y, dx, dw)");
      // The wide layers' sgemm is oneDNN's, which sums differently on two threads (2.8e-6 to
      // 3.3e-6 apart here): only the narrow path, all ringtrain's, is held to equal bits; the
      // wide one to the kernels' own bound.
      if (s.in <= 32 && s.out <= 32)
        CHECK(std::memcmp(one[i].data(), two[i].data(), one[i].size() * sizeof(float)) == 0);
      else
        CHECK(rel_error(two[i], Vec(one[i].begin(), one[i].end())) < kTol);
    }
  }
}

TEST_CASE("Winograd: rejects shapes it cannot take", "[nn][winograd]") {
  CHECK_THROWS_AS(winograd::Conv3x3({1, 12, 8, 4, 4}), std::invalid_argument);
  CHECK_THROWS_AS(winograd::Weights(8, 20), std::invalid_argument);
  CHECK(winograd::applies(64, 128, 3, 1, 1, 1, 1));
  CHECK(winograd::applies(16, 32, 3, 1, 1, 1, 1));
  CHECK_FALSE(winograd::applies(8, 64, 3, 1, 1, 1, 1));    // too thin
  CHECK_FALSE(winograd::applies(64, 64, 3, 2, 1, 1, 1));   // stride 2
  CHECK_FALSE(winograd::applies(64, 64, 3, 1, 2, 2, 1));   // dilated
  CHECK_FALSE(winograd::applies(64, 64, 3, 1, 1, 1, 2));   // grouped
  CHECK_FALSE(winograd::applies(64, 64, 1, 1, 0, 1, 1));   // 1x1
  CHECK_FALSE(winograd::applies(72, 68, 3, 1, 1, 1, 1));   // 68 channels: not whole nChw8c blocks
  CHECK(winograd::worthwhile({1, 64, 64, 16, 16}));
  CHECK_FALSE(winograd::worthwhile({32, 512, 512, 2, 2}));  // 128 output pixels
}

TEST_CASE("Conv2d runs its fp32 3x3 layers of 16+ channels and 256+ output pixels on Winograd on AVX2 (on AVX-512 "
          "oneDNN's, from 64 channels), with exact gradients",
          "[nn][winograd]") {
  const dnnl::cpu_isa isa = effective_isa();
  const char* off = std::getenv("RINGTRAIN_CONV_WINOGRAD");
  const bool avx2 = (isa == dnnl::cpu_isa::avx2 || isa == dnnl::cpu_isa::avx2_vnni) && !(off && std::string(off) == "0");
  const Conv2d::Options o{.in = 64, .out = 72, .kernel = 3, .stride = 1, .pad = 1, .bias = true};
  const winograd::Shape s{3, 64, 72, 10, 9};
  const Dims in{s.batch, s.in, s.height, s.width};
  Conv2d conv("conv", o);
  std::vector<std::vector<float>> params{random_floats(static_cast<std::size_t>(72 * 64 * 9), 21),
                                         random_floats(72, 22)};
  const auto x = random_floats(static_cast<std::size_t>(numel(in)), 23);
  const auto dy = random_floats(static_cast<std::size_t>(numel(conv.out_shape(in))), 24);
  const LayerRun got = run_layer(conv, in, x, params, dy, Phase::kTrain);
  CHECK(conv.winograd() == avx2);
  // On AVX-512 the same layer asks oneDNN for its Winograd kernels, which take all three passes.
  const bool avx512 = isa == dnnl::cpu_isa::avx512_core || isa == dnnl::cpu_isa::avx512_core_vnni ||
                      isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  CHECK(conv.onednn_winograd_passes() == (avx512 && !(off && std::string(off) == "0") ? 3 : 0));
  const Conv3x3Ref want = conv3x3_reference(s, to_double(x), to_double(params[0]), to_double(params[1]), to_double(dy));
  INFO("relative errors: forward " << rel_error(got.y, want.y) << ", diff_src " << rel_error(got.dx, want.dx)
                                   << ", diff_weights " << rel_error(got.dparams[0], want.dw));
  CHECK(rel_error(got.y, want.y) < kTol);
  CHECK(rel_error(got.dx, want.dx) < kTol);
  CHECK(rel_error(got.dparams[0], want.dw) < kTol);
  CHECK(rel_error(got.dparams[1], want.db) < 1e-6);
  // Not on Winograd: 8 input channels; stride 2.
  Conv2d thin("thin", {.in = 8, .out = 64, .kernel = 3, .pad = 1});
  run_layer(thin, {1, 8, 8, 8}, random_floats(8 * 64, 1), {random_floats(64 * 8 * 9, 2), random_floats(64, 3)}, {},
            Phase::kEval);
  CHECK_FALSE(thin.winograd());
  CHECK(thin.onednn_winograd_passes() == 0);
  Conv2d strided("strided", {.in = 64, .out = 64, .kernel = 3, .stride = 2, .pad = 1});
  run_layer(strided, {1, 64, 8, 8}, random_floats(64 * 64, 4), {random_floats(64 * 64 * 9, 5), random_floats(64, 6)},
            {}, Phase::kEval);
  CHECK_FALSE(strided.winograd());
  CHECK(strided.onednn_winograd_passes() == 0);
  Conv2d small("small", {.in = 64, .out = 64, .kernel = 3, .pad = 1});  // 64 output pixels
  run_layer(small, {1, 64, 8, 8}, random_floats(64 * 64, 7), {random_floats(64 * 64 * 9, 8), random_floats(64, 9)}, {},
            Phase::kEval);
  CHECK_FALSE(small.winograd());
}

TEST_CASE("Conv2d on Winograd transforms its weights once per parameter change", "[nn][winograd]") {
  const dnnl::cpu_isa isa = effective_isa();
  const char* off = std::getenv("RINGTRAIN_CONV_WINOGRAD");
  if ((isa != dnnl::cpu_isa::avx2 && isa != dnnl::cpu_isa::avx2_vnni) || (off && std::string(off) == "0")) {
    WARN("skipped: Conv2d runs on Winograd on AVX2 CPUs only, unless RINGTRAIN_CONV_WINOGRAD=0");
    return;
  }
  Conv2d conv("conv", {.in = 64, .out = 64, .kernel = 3, .pad = 1, .bias = false});
  check_converts_once(conv, {1, 64, 17, 16}, &Conv2d::winograd, kTol);
}
