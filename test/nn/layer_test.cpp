// Each layer against a naive double-precision reference written here with plain loops:
// forward outputs are compared directly; diff_src and parameter gradients are compared
// with central differences of the reference (double, eps 1e-6), which is the gradient
// check. Relative error = max |layer - reference| / max |reference|. 4-D layers are also
// run on blocked (nChw16c) inputs, the layout they see inside a model.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "layer_harness.h"
#include "nn/Conv2d.h"
#include "nn/Flatten.h"
#include "nn/Linear.h"
#include "nn/Pool2d.h"
#include "nn/ReLU.h"
#include "nn/SoftmaxCrossEntropy.h"

using namespace ringtrain;
using namespace ringtrain::test;
using tag = dnnl::memory::format_tag;

namespace {

// y[n,o,i,j] = b[o] + sum_{c,u,v} w[o,c,u,v] x[n,c,i*s-p+u,j*s-p+v]
RefForward conv_ref(const Dims& in, int out_c, int k, int s, int p, bool bias) {
  return [=](const Vec& x, const std::vector<Vec>& prm) {
    const auto N = in[0], C = in[1], H = in[2], W = in[3];
    const auto OH = (H + 2 * p - k) / s + 1, OW = (W + 2 * p - k) / s + 1;
    Vec y(N * out_c * OH * OW);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < out_c; ++o)
        for (int64_t i = 0; i < OH; ++i)
          for (int64_t j = 0; j < OW; ++j) {
            double acc = bias ? prm[1][o] : 0.0;
            for (int64_t c = 0; c < C; ++c)
              for (int u = 0; u < k; ++u)
                for (int v = 0; v < k; ++v) {
                  const int64_t h = i * s - p + u, w = j * s - p + v;
                  if (h < 0 || h >= H || w < 0 || w >= W) continue;
                  acc += prm[0][((o * C + c) * k + u) * k + v] * x[((n * C + c) * H + h) * W + w];
                }
            y[((n * out_c + o) * OH + i) * OW + j] = acc;
          }
    return y;
  };
}

// Pooling over k x k windows; max ignores padding, avg divides by k*k (include padding).
RefForward pool_ref(const Dims& in, bool max, int k, int s, int p) {
  return [=](const Vec& x, const std::vector<Vec>&) {
    const auto N = in[0], C = in[1], H = in[2], W = in[3];
    const auto OH = (H + 2 * p - k) / s + 1, OW = (W + 2 * p - k) / s + 1;
    Vec y(N * C * OH * OW);
    for (int64_t nc = 0; nc < N * C; ++nc)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
          for (int u = 0; u < k; ++u)
            for (int v = 0; v < k; ++v) {
              const int64_t h = i * s - p + u, w = j * s - p + v;
              if (h < 0 || h >= H || w < 0 || w >= W) continue;
              const double xv = x[(nc * H + h) * W + w];
              acc = max ? std::max(acc, xv) : acc + xv;
            }
          y[(nc * OH + i) * OW + j] = max ? acc : acc / (k * k);
        }
    return y;
  };
}

std::vector<std::vector<float>> conv_params(int out_c, int in_c, int k, bool bias, std::uint64_t seed) {
  std::vector<std::vector<float>> p{random_floats(static_cast<std::size_t>(out_c) * in_c * k * k, seed)};
  if (bias) p.push_back(random_floats(out_c, seed + 1));
  return p;
}

}  // namespace

TEST_CASE("Conv2d matches the naive convolution and its central differences", "[nn][layer]") {
  struct Cfg {
    int in_c, out_c, k, s, p;
    bool bias;
    Dims in;
    tag t;
  };
  const std::vector<Cfg> cfgs{
      {3, 4, 3, 1, 1, true, {2, 3, 6, 6}, tag::undef},       // padded, plain input
      {3, 5, 5, 2, 2, true, {2, 3, 9, 9}, tag::undef},       // stride 2, odd size (floor)
      {16, 8, 3, 1, 0, false, {2, 16, 5, 5}, tag::nChw16c},  // blocked input, no bias
      {1, 6, 5, 1, 2, true, {2, 1, 8, 8}, tag::undef},       // LeNet-like first layer
      // LeNet's conv2: oneDNN has no jit backward-weights on the forward's layouts here, so
      // it runs on nhwc copies and the layer's internal src / diff_dst reorders are exercised.
      {6, 16, 5, 1, 0, true, {2, 6, 9, 9}, tag::nChw16c},
  };
  for (const auto& c : cfgs) {
    Conv2d conv("conv", c.in_c, c.out_c, c.k, c.s, c.p, c.bias);
    check_layer(conv, c.in, conv_ref(c.in, c.out_c, c.k, c.s, c.p, c.bias),
                conv_params(c.out_c, c.in_c, c.k, c.bias, 5), c.t);
  }
}

TEST_CASE("Linear matches x W^T + b and its central differences", "[nn][layer]") {
  for (bool bias : {true, false}) {
    const int N = 3, I = 7, O = 5;
    Linear fc("fc", I, O, bias);
    std::vector<std::vector<float>> p{random_floats(O * I, 9)};
    if (bias) p.push_back(random_floats(O, 10));
    check_layer(
        fc, {N, I},
        [&](const Vec& x, const std::vector<Vec>& prm) {
          Vec y(N * O);
          for (int n = 0; n < N; ++n)
            for (int o = 0; o < O; ++o) {
              double acc = bias ? prm[1][o] : 0.0;
              for (int i = 0; i < I; ++i) acc += x[n * I + i] * prm[0][o * I + i];
              y[n * O + o] = acc;
            }
          return y;
        },
        p);
  }
}

TEST_CASE("ReLU matches max(x, 0) and its central differences, plain and blocked", "[nn][layer]") {
  const RefForward ref = [](const Vec& x, const std::vector<Vec>&) {
    Vec y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = std::max(x[i], 0.0);
    return y;
  };
  // Inputs are uniform in [-1, 1); the chance that one lies within eps of the kink is ~1e-6.
  ReLU plain("relu");
  check_layer(plain, {2, 3, 4, 5}, ref, {});
  ReLU blocked("relu");
  check_layer(blocked, {2, 16, 3, 3}, ref, {}, tag::nChw16c);
  ReLU flat("relu");
  check_layer(flat, {4, 9}, ref, {});
}

TEST_CASE("MaxPool2d and AvgPool2d match naive pooling and their central differences", "[nn][layer]") {
  struct Cfg {
    bool max;
    int k, s, p;
    Dims in;
    tag t;
  };
  const std::vector<Cfg> cfgs{
      {true, 2, 2, 0, {2, 3, 6, 6}, tag::undef},     {true, 2, 2, 0, {2, 3, 7, 5}, tag::undef},  // floor
      {true, 3, 2, 1, {2, 16, 7, 7}, tag::nChw16c},  {false, 2, 2, 0, {2, 3, 6, 6}, tag::undef},
      {false, 3, 2, 1, {2, 16, 5, 5}, tag::nChw16c},
  };
  for (const auto& c : cfgs) {
    Pool2d pool("pool", c.max ? Pool2d::Mode::kMax : Pool2d::Mode::kAvg, c.k, c.s, c.p);
    check_layer(pool, c.in, pool_ref(c.in, c.max, c.k, c.s, c.p), {}, c.t);
  }
}

TEST_CASE("Flatten reshapes (N, C, H, W) to (N, C*H*W) and back, also from a blocked layout", "[nn][layer]") {
  const RefForward identity = [](const Vec& x, const std::vector<Vec>&) { return x; };
  Flatten plain("flatten");
  CHECK(plain.out_shape({2, 3, 4, 5}) == Dims{2, 60});
  check_layer(plain, {2, 3, 4, 5}, identity, {});
  Flatten blocked("flatten");
  check_layer(blocked, {2, 16, 2, 3}, identity, {}, tag::nChw16c);
}

TEST_CASE("Layers reject impossible shapes with std::invalid_argument", "[nn][layer]") {
  CHECK_THROWS_AS(Conv2d("c", 3, 4, 5).out_shape({1, 3, 4, 4}), std::invalid_argument);
  CHECK_THROWS_AS(Conv2d("c", 3, 4, 3).out_shape({1, 1, 8, 8}), std::invalid_argument);
  CHECK_THROWS_AS(Linear("f", 10, 4).out_shape({1, 9}), std::invalid_argument);
  CHECK_THROWS_AS(Pool2d("p", Pool2d::Mode::kMax, 4, 4).out_shape({1, 1, 3, 3}), std::invalid_argument);
  CHECK_THROWS_AS(Conv2d("c", 0, 4, 3), std::invalid_argument);
}

TEST_CASE("SoftmaxCrossEntropy: stable loss, arg-max count and mean gradient", "[nn][layer]") {
  const int n = 3, k = 4;
  // Row 1 has huge logits: a naive exp would overflow to inf.
  const std::vector<float> z{0.1f, -0.3f, 2.0f, 0.5f, 1000.f, 990.f, 1001.f, -1000.f, 0.f, 0.f, 0.f, 0.f};
  const std::vector<std::int32_t> y{2, 0, 3};
  SoftmaxCrossEntropy ce;
  const LossResult r = ce.forward(z.data(), y.data(), n, k);
  double want = 0.0;
  for (int i = 0; i < n; ++i) {
    double m = -1e300, s = 0.0;
    for (int j = 0; j < k; ++j) m = std::max(m, static_cast<double>(z[i * k + j]));
    for (int j = 0; j < k; ++j) s += std::exp(z[i * k + j] - m);
    want += std::log(s) + m - z[i * k + y[i]];
  }
  CHECK(std::isfinite(r.loss_sum));
  CHECK(r.loss_sum == Approx(want).epsilon(1e-6));
  CHECK(r.count == 3);
  CHECK(r.correct == 1);  // row 0 (arg-max 2); row 1 arg-max 2 != 0; row 2 all tied -> 0 != 3
  std::vector<float> d(n * k);
  ce.backward(d.data());
  // Central differences of the mean loss in double.
  for (int idx = 0; idx < n * k; ++idx) {
    auto mean_loss = [&](double delta) {
      double l = 0.0;
      for (int i = 0; i < n; ++i) {
        double m = -1e300, s = 0.0;
        auto zz = [&](int j) { return z[i * k + j] + (i * k + j == idx ? delta : 0.0); };
        for (int j = 0; j < k; ++j) m = std::max(m, zz(j));
        for (int j = 0; j < k; ++j) s += std::exp(zz(j) - m);
        l += std::log(s) + m - zz(y[i]);
      }
      return l / n;
    };
    const double num = (mean_loss(1e-4) - mean_loss(-1e-4)) / 2e-4;
    CHECK(d[idx] == Approx(num).margin(1e-5));
  }
  const std::vector<std::int32_t> bad{0, 4, 1};
  CHECK_THROWS_AS(ce.forward(z.data(), bad.data(), n, k), std::invalid_argument);
}
