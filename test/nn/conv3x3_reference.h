// A 3x3 convolution (stride 1, padding 1) and its exact gradients written in double, the
// reference of nn's own convolution kernels (nn/Winograd, nn/PixelPairConv): a linear map,
// so its adjoints are exact and need no differences. nchw <-> nChw8c through oneDNN, and the
// two checks both kernels pass: the three passes against the reference, and Conv2d on the
// kernel converting its weights exactly once per parameter change.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include <catch2/catch.hpp>

#include <oneapi/dnnl/dnnl.hpp>

#include "layer_harness.h"
#include "nn/Conv2d.h"
#include "nn/DnnlContext.h"
#include "nn/ParamsVersion.h"

namespace ringtrain::test {

struct Conv3x3Ref {
  Vec y, dx, dw, db;
};

// y = conv3x3(x, w) + b (stride 1, padding 1), and the gradients of sum(y * dy), in double;
// s has the fields of both kernels' Shape (batch, in, out, height, width).
template <class Shape>
Conv3x3Ref conv3x3_reference(const Shape& s, const Vec& x, const Vec& w, const Vec& b, const Vec& dy) {
  const std::int64_t N = s.batch, C = s.in, K = s.out, H = s.height, W = s.width;
  Conv3x3Ref r{Vec(N * K * H * W), Vec(N * C * H * W, 0.0), Vec(K * C * 9, 0.0), Vec(K, 0.0)};
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t i = 0; i < H; ++i)
        for (std::int64_t j = 0; j < W; ++j) {
          const std::int64_t yi = ((n * K + k) * H + i) * W + j;
          double acc = b.empty() ? 0.0 : b[k];
          const double g = dy[yi];
          if (!b.empty()) r.db[k] += g;
          for (std::int64_t c = 0; c < C; ++c)
            for (int u = 0; u < 3; ++u)
              for (int v = 0; v < 3; ++v) {
                const std::int64_t h = i + u - 1, ww = j + v - 1;
                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                const std::int64_t xi = ((n * C + c) * H + h) * W + ww, wi = ((k * C + c) * 3 + u) * 3 + v;
                acc += w[wi] * x[xi];
                r.dx[xi] += w[wi] * g;
                r.dw[wi] += x[xi] * g;
              }
          r.y[yi] = acc;
        }
  return r;
}

// Plain nchw floats <-> nChw8c through oneDNN reorders.
inline std::vector<float> reorder_layout(const std::vector<float>& v, const dnnl::memory::dims& dims, dnnl::memory::format_tag from,
                                  dnnl::memory::format_tag to) {
  using dnnl::memory;
  auto& eng = DnnlContext::get().engine();
  auto& strm = DnnlContext::get().stream();
  std::vector<float> in = v, out(v.size());
  memory a({dims, memory::data_type::f32, from}, eng, in.data()), b({dims, memory::data_type::f32, to}, eng, out.data());
  dnnl::reorder(a, b).execute(strm, a, b);
  strm.wait();
  return out;
}

// An own kernel's three passes (Conv, Weights: winograd:: or pixelpair::) on shape s, with
// bias and a fused ReLU or without, against conv3x3_reference within tol relative to the
// largest reference value; with zero_taps, taps no pixel reaches must come out exactly zero.
template <class Conv, class Weights, class Shape>
void check_own_kernel(const Shape& s, bool bias, bool relu, double tol, std::uint64_t seed, bool zero_taps = false) {
  using tag = dnnl::memory::format_tag;
  INFO("shape " << s.batch << "x" << s.in << "x" << s.height << "x" << s.width << " -> " << s.out << ", bias " << bias
                << ", relu " << relu);
  const dnnl::memory::dims xd{s.batch, s.in, s.height, s.width}, yd{s.batch, s.out, s.height, s.width};
  const auto x = random_floats(static_cast<std::size_t>(s.batch * s.in * s.height * s.width), seed);
  const auto w = random_floats(static_cast<std::size_t>(s.out * s.in * 9), seed + 1);
  const auto b = bias ? random_floats(static_cast<std::size_t>(s.out), seed + 2) : std::vector<float>{};
  const auto dy = random_floats(static_cast<std::size_t>(s.batch * s.out * s.height * s.width), seed + 3);
  Conv3x3Ref want = conv3x3_reference(s, to_double(x), to_double(w), to_double(b), to_double(dy));

  Weights weights(s.in, s.out);
  weights.set(w.data());
  const Conv conv(s);
  const auto x8 = reorder_layout(x, xd, tag::nchw, tag::nChw8c);
  std::vector<float> y8(dy.size(), 7.f);
  conv.forward(weights, x8.data(), y8.data(), bias ? b.data() : nullptr, relu);
  if (relu)  // a fused ReLU changes only the forward's output (the ReLU layer masks the gradient)
    for (double& v : want.y) v = std::max(v, 0.0);
  const double ey = rel_error(reorder_layout(y8, yd, tag::nChw8c, tag::nchw), want.y);

  const auto dy8 = reorder_layout(dy, yd, tag::nchw, tag::nChw8c);
  std::vector<float> dx8(x.size(), 7.f), dw(w.size(), 7.f), db(b.size(), 7.f);
  conv.backward_data(weights, dy8.data(), dx8.data());
  conv.backward_weights(x8.data(), dy8.data(), dw.data(), bias ? db.data() : nullptr);
  const double edx = rel_error(reorder_layout(dx8, xd, tag::nChw8c, tag::nchw), want.dx);
  const double edw = rel_error(dw, want.dw);
  INFO("relative errors: forward " << ey << ", diff_src " << edx << ", diff_weights " << edw);
  CHECK(ey < tol);
  CHECK(edx < tol);
  CHECK(edw < tol);
  if (bias) CHECK(rel_error(db, want.db) < 1e-6);
  if (zero_taps) {
    std::size_t reached = 0, nonzero = 0;
    for (std::size_t i = 0; i < dw.size(); ++i) {
      reached += want.dw[i] != 0.0;
      nonzero += want.dw[i] == 0.0 && dw[i] != 0.f;
    }
    CHECK(reached > 0);
    CHECK(nonzero == 0);
  }
}

// Conv2d `conv` (64 -> 64 channels, 3x3, padding 1, no bias), prepared for input dims `in`
// (N, 64, H, W) in eval, runs on an own kernel (`on_own`: its winograd() or pixel_pairs()) and
// converts its weights on the first forward, not on the second, and again after the
// parameters change, after which its output is that of the new weights within tol.
inline void check_converts_once(Conv2d& conv, const Dims& in, bool (Conv2d::*on_own)() const, double tol) {
  using dnnl::memory;
  struct {
    std::int64_t batch, in, out, height, width;
  } const s{in[0], 64, 64, in[2], in[3]};
  auto& eng = DnnlContext::get().engine();
  auto& strm = DnnlContext::get().stream();
  Tensor w({64, 64, 3, 3}), dw({64, 64, 3, 3});
  const auto w0 = random_floats(static_cast<std::size_t>(w.numel()), 31);
  std::copy(w0.begin(), w0.end(), w.data());
  ParamsVersion version;
  conv.bind_params({w}, {dw}, &version);
  conv.prepare(plain_md(in), Phase::kEval, false);
  REQUIRE((conv.*on_own)());
  const auto x = random_floats(static_cast<std::size_t>(numel(in)), 32);
  std::vector<float> xc = x, y(x.size());
  memory x_user(plain_md(in), eng, xc.data()), y_user(plain_md(in), eng, y.data());
  memory src(conv.src_md(), eng), dst(conv.dst_md(), eng);
  dnnl::reorder(x_user, src).execute(strm, x_user, src);
  auto run = [&] {
    conv.forward(src, dst, Phase::kEval);
    dnnl::reorder(dst, y_user).execute(strm, dst, y_user);
    strm.wait();
    return y;
  };
  run();
  run();
  CHECK(conv.weight_conversions() == 1);  // the parameters did not change
  std::vector<float> w1 = random_floats(static_cast<std::size_t>(w.numel()), 33);
  {
    ParamsSpan write(std::span<float>(w.data(), static_cast<std::size_t>(w.numel())), version);
    std::copy(w1.begin(), w1.end(), write.begin());
  }
  const std::vector<float> got = run();
  CHECK(conv.weight_conversions() == 2);
  CHECK(rel_error(got, conv3x3_reference(s, to_double(x), to_double(w1), {}, Vec(numel(in), 0.0)).y) < tol);
}

}  // namespace ringtrain::test
