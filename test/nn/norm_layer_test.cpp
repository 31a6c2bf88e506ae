// BatchNorm2d (train and eval, running statistics), LocalResponseNorm and Dropout against
// naive double references; gradients against the references' central differences (see
// layer_test.cpp for the error measure).
#include <catch2/catch.hpp>

#include <cmath>

#include "layer_harness.h"
#include "nn/BatchNorm2d.h"
#include "nn/Dropout.h"
#include "nn/LocalResponseNorm.h"

using namespace ringtrain;
using namespace ringtrain::test;
using tag = dnnl::memory::format_tag;

namespace {

// Per channel c over (n, h, w): mean, biased variance (what the normalisation uses).
void batch_stats(const Vec& x, const Dims& in, Vec& mean, Vec& var) {
  const auto N = in[0], C = in[1], HW = in[2] * in[3];
  mean.assign(C, 0.0);
  var.assign(C, 0.0);
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i) mean[c] += x[(n * C + c) * HW + i];
    mean[c] /= static_cast<double>(N * HW);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i) var[c] += std::pow(x[(n * C + c) * HW + i] - mean[c], 2);
    var[c] /= static_cast<double>(N * HW);
  }
}

// y = gamma (x - mean) / sqrt(var + eps) + beta; batch statistics unless given.
Vec bn_ref(const Vec& x, const Dims& in, const Vec& gamma, const Vec& beta, double eps, const Vec* mean_in = nullptr,
           const Vec* var_in = nullptr) {
  Vec mean, var;
  if (mean_in) {
    mean = *mean_in;
    var = *var_in;
  } else {
    batch_stats(x, in, mean, var);
  }
  const auto N = in[0], C = in[1], HW = in[2] * in[3];
  Vec y(x.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < HW; ++i) {
        const auto k = (n * C + c) * HW + i;
        y[k] = gamma[c] * (x[k] - mean[c]) / std::sqrt(var[c] + eps) + beta[c];
      }
  return y;
}

// y = x (k + alpha / size * sum_{|c' - c| <= size/2} x_c'^2)^(-beta)
RefForward lrn_ref(const Dims& in, int size, double alpha, double beta, double k) {
  return [=](const Vec& x, const std::vector<Vec>&) {
    const auto N = in[0], C = in[1], HW = in[2] * in[3];
    Vec y(x.size());
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t i = 0; i < HW; ++i) {
          double sum = 0.0;
          for (int64_t cc = std::max<int64_t>(0, c - size / 2); cc <= std::min<int64_t>(C - 1, c + size / 2); ++cc)
            sum += std::pow(x[(n * C + cc) * HW + i], 2);
          y[(n * C + c) * HW + i] = x[(n * C + c) * HW + i] * std::pow(k + alpha / size * sum, -beta);
        }
    return y;
  };
}

}  // namespace

TEST_CASE("BatchNorm2d train matches batch-statistics normalisation and its central differences", "[nn][layer]") {
  // BN's backward subtracts two means of similar size, so float cancellation costs more
  // digits than in the other layers: tolerance 1e-3 (observed ~1e-6).
  for (auto [in, t] : {std::pair<Dims, tag>{{3, 4, 3, 3}, tag::undef}, {{2, 16, 3, 2}, tag::nChw16c}}) {
    const int C = static_cast<int>(in[1]);
    BatchNorm2d bn("bn", C);
    std::vector<float> buffers(2 * C);
    bn.bind_buffers(buffers.data());
    bn.reset_buffers();
    const std::vector<std::vector<float>> params{random_floats(C, 3, 0.5f, 1.5f), random_floats(C, 4)};
    const auto x = random_floats(numel(in), 5);
    const auto dy = random_floats(numel(in), 6);
    const LayerRun got = run_layer(bn, in, x, params, dy, Phase::kTrain, t, buffers.data());
    const RefForward ref = [&](const Vec& xx, const std::vector<Vec>& p) { return bn_ref(xx, in, p[0], p[1], 1e-5); };
    const RefGrads want =
        reference_grads(ref, to_double(x), {to_double(params[0]), to_double(params[1])}, to_double(dy));
    CHECK(rel_error(got.y, want.y) < 1e-5);
    CHECK(rel_error(got.dx, want.dx) < 1e-3);
    CHECK(rel_error(got.dparams[0], want.dparams[0]) < 1e-3);
    CHECK(rel_error(got.dparams[1], want.dparams[1]) < 1e-3);

    // Running statistics, PyTorch's rule: r = 0.9 r + 0.1 s, unbiased variance.
    Vec mean, var;
    batch_stats(to_double(x), in, mean, var);
    const double m = static_cast<double>(in[0] * in[2] * in[3]);
    for (int c = 0; c < C; ++c) {
      CHECK(buffers[c] == Approx(0.1 * mean[c]).margin(1e-6));
      CHECK(buffers[C + c] == Approx(0.9 + 0.1 * var[c] * m / (m - 1)).margin(1e-6));
    }
  }
}

TEST_CASE("BatchNorm2d eval normalises with the running statistics and leaves them alone", "[nn][layer]") {
  const Dims in{2, 16, 3, 3};
  for (tag t : {tag::undef, tag::nChw16c}) {
    BatchNorm2d bn("bn", 16);
    std::vector<float> buffers = random_floats(32, 7);
    for (int c = 16; c < 32; ++c) buffers[c] = 0.5f + std::abs(buffers[c]);  // variances > 0
    const std::vector<float> before = buffers;
    const std::vector<std::vector<float>> params{random_floats(16, 8, 0.5f, 1.5f), random_floats(16, 9)};
    const auto x = random_floats(numel(in), 10);
    const LayerRun got = run_layer(bn, in, x, params, {}, Phase::kEval, t, buffers.data());
    const Vec rm(before.begin(), before.begin() + 16), rv(before.begin() + 16, before.end());
    const Vec want = bn_ref(to_double(x), in, to_double(params[0]), to_double(params[1]), 1e-5, &rm, &rv);
    CHECK(rel_error(got.y, want) < 1e-5);
    CHECK(buffers == before);
  }
}

TEST_CASE("LocalResponseNorm matches the across-channel formula (alpha / size) and its central differences",
          "[nn][layer]") {
  struct Cfg {
    int size;
    float alpha, beta, k;
    Dims in;
    tag t;
  };
  const std::vector<Cfg> cfgs{
      {5, 1e-4f, 0.75f, 2.f, {2, 7, 3, 3}, tag::undef},   // AlexNet's constants
      {5, 2.0f, 0.75f, 1.f, {2, 7, 3, 3}, tag::undef},    // strong normalisation: the sum matters
      {3, 1.5f, 0.6f, 1.f, {2, 16, 2, 3}, tag::nChw16c},  // blocked layout
  };
  for (const auto& c : cfgs) {
    LocalResponseNorm lrn("lrn", c.size, c.alpha, c.beta, c.k);
    const auto x = random_floats(numel(c.in), 11, -2.f, 2.f);
    const auto dy = random_floats(numel(c.in), 12);
    const LayerRun got = run_layer(lrn, c.in, x, {}, dy, Phase::kTrain, c.t);
    const RefGrads want = reference_grads(lrn_ref(c.in, c.size, c.alpha, c.beta, c.k), to_double(x), {}, to_double(dy));
    INFO(lrn.describe());
    CHECK(rel_error(got.y, want.y) < 1e-5);
    CHECK(rel_error(got.dx, want.dx) < 1e-4);
  }
}

TEST_CASE("Dropout keeps 1-p of the elements scaled by 1/(1-p), reproducibly; eval is the identity", "[nn][layer]") {
  const Dims in{20, 500};
  const float p = 0.3f;
  const auto x = random_floats(numel(in), 13, 0.5f, 1.5f);  // nonzero, so a zero output means dropped
  const auto dy = random_floats(numel(in), 14);
  Dropout drop("dropout", p);
  const LayerRun a = run_layer(drop, in, x, {}, dy, Phase::kTrain, tag::undef, nullptr, 77);
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const bool kept = a.y[i] != 0.f;
    dropped += kept ? 0 : 1;
    // y = m x and dx = m dy with the same m in {0, 1/(1-p)}: the gradient of the linear map.
    const double m = kept ? 1.0 / (1.0 - p) : 0.0;
    if (kept) REQUIRE(a.y[i] == Approx(x[i] * m).epsilon(1e-6));
    REQUIRE(a.dx[i] == Approx(dy[i] * m).epsilon(1e-6).margin(1e-7));
  }
  // 10000 Bernoulli(0.3) draws: std 0.0046; 0.02 is over 4 sigma.
  CHECK(std::abs(static_cast<double>(dropped) / x.size() - p) < 0.02);

  // Gradient check: with the seed fixed, dropout is the linear map y = m x; the reference
  // applies the mask read off the first run (m = y / x), and the layer, rerun with the same
  // seed, must match its forward and the central differences of its backward.
  std::vector<double> mask(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) mask[i] = a.y[i] / static_cast<double>(x[i]);
  const Dims small{4, 25};
  Dropout rerun("dropout", p);
  const std::vector<float> xs(x.begin(), x.begin() + 100), dys(dy.begin(), dy.begin() + 100);
  const LayerRun got = run_layer(rerun, small, xs, {}, dys, Phase::kTrain, tag::undef, nullptr, 77);
  const RefForward ref = [&](const Vec& xx, const std::vector<Vec>&) {
    Vec y(xx.size());
    for (std::size_t i = 0; i < xx.size(); ++i) y[i] = mask[i] * xx[i];
    return y;
  };
  const RefGrads want = reference_grads(ref, to_double(xs), {}, to_double(dys));
  CHECK(rel_error(got.y, want.y) < 1e-6);
  CHECK(rel_error(got.dx, want.dx) < 1e-5);

  Dropout again("dropout", p), other("dropout", p);
  CHECK(run_layer(again, in, x, {}, {}, Phase::kTrain, tag::undef, nullptr, 77).y == a.y);
  CHECK(run_layer(other, in, x, {}, {}, Phase::kTrain, tag::undef, nullptr, 78).y != a.y);
  Dropout eval("dropout", p);
  CHECK(run_layer(eval, in, x, {}, {}, Phase::kEval).y == x);
  CHECK_THROWS_AS(Dropout("d", 1.0f), std::invalid_argument);
}
