// BatchStats: per-channel mean and biased variance in every layout it reads, against a double
// reference of the same fp32 values; the padding lanes of blocked layouts ignored; the same
// bits at any thread count; other layouts and types left to oneDNN.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "nn/BatchStats.h"
#include "nn/DnnlContext.h"

using namespace ringtrain;
using dnnl::memory;
using tag = memory::format_tag;

namespace {

struct Stats {
  std::vector<float> mean, variance;
};

// Values (n, c, h, w) in nchw order: channel c around 40 + c (so the sums cancel much) with std
// 0.25 + 0.05 c.
std::vector<float> values(const memory::dims& d, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> z(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(d[0] * d[1] * d[2] * d[3]));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto c = static_cast<float>((static_cast<std::int64_t>(i) / (d[2] * d[3])) % d[1]);
    x[i] = 40.0f + c + (0.25f + 0.05f * c) * z(rng);
  }
  return x;
}

// `x` (nchw) in layout `t`, its padding lanes (if any) set to NaN, which must not reach a result.
memory in_layout(const std::vector<float>& x, const memory::dims& d, tag t) {
  auto& eng = DnnlContext::get().engine();
  memory plain({d, memory::data_type::f32, tag::nchw}, eng, const_cast<float*>(x.data()));
  memory out({d, memory::data_type::f32, t}, eng);
  auto* p = static_cast<float*>(out.get_data_handle());
  std::fill(p, p + out.get_desc().get_size() / sizeof(float), std::numeric_limits<float>::quiet_NaN());
  dnnl::reorder(plain, out).execute(DnnlContext::get().stream(), plain, out);
  DnnlContext::get().stream().wait();
  if (t == tag::nChw8c || t == tag::nChw16c) {  // the reorder may zero the padding: NaN again
    const std::int64_t b = t == tag::nChw8c ? 8 : 16, blocks = (d[1] + b - 1) / b, hw = d[2] * d[3];
    for (std::int64_t n = 0; n < d[0]; ++n)
      for (std::int64_t i = 0; i < hw; ++i)
        for (std::int64_t k = d[1] - (blocks - 1) * b; k < b; ++k)
          p[((n * blocks + blocks - 1) * hw + i) * b + k] = std::numeric_limits<float>::quiet_NaN();
  }
  return out;
}

Stats run(const memory& m, int channels) {
  Stats s{std::vector<float>(channels), std::vector<float>(channels)};
  BatchStats::compute(m, s.mean.data(), s.variance.data());
  return s;
}

}  // namespace

TEST_CASE("BatchStats: mean and biased variance in nchw, nhwc, nChw8c and nChw16c", "[nn][batchnorm]") {
  // 35 positions (not a multiple of 8: nchw's tail), and 130 (more than one fp32 run of 64 rows);
  // 10 channels pad the blocked layouts, 300 span two of nhwc's channel slices.
  for (const memory::dims& d : {memory::dims{3, 10, 5, 7}, memory::dims{2, 10, 10, 13}, memory::dims{2, 300, 3, 3}}) {
    const std::vector<float> x = values(d, 7);
    const std::int64_t hw = d[2] * d[3], count = d[0] * hw;
    std::vector<double> mean(d[1], 0.0), var(d[1], 0.0);
    for (std::int64_t c = 0; c < d[1]; ++c) {
      for (std::int64_t n = 0; n < d[0]; ++n)
        for (std::int64_t i = 0; i < hw; ++i) mean[c] += x[(n * d[1] + c) * hw + i];
      mean[c] /= static_cast<double>(count);
      for (std::int64_t n = 0; n < d[0]; ++n)
        for (std::int64_t i = 0; i < hw; ++i) var[c] += std::pow(x[(n * d[1] + c) * hw + i] - mean[c], 2);
      var[c] /= static_cast<double>(count);
    }
    for (tag t : {tag::nchw, tag::nhwc, tag::nChw8c, tag::nChw16c}) {
      CAPTURE(d[0], d[1], d[2], d[3], static_cast<int>(t));
      const memory m = in_layout(x, d, t);
      REQUIRE(BatchStats::supports(m.get_desc()));
      const Stats s = run(m, static_cast<int>(d[1]));
      for (std::int64_t c = 0; c < d[1]; ++c) {
        CAPTURE(c);
        // The mean within its rounding to fp32 (and a little), the variance within 1e-6 of itself.
        REQUIRE(std::abs(s.mean[c] - mean[c]) <= 0.6 * std::abs(mean[c]) * std::numeric_limits<float>::epsilon());
        REQUIRE(std::abs(s.variance[c] - var[c]) <= 1e-6 * var[c]);
      }
    }
  }
}

TEST_CASE("BatchStats: the same bits with 1 and 2 threads", "[nn][batchnorm]") {
  const memory::dims d{4, 24, 9, 11};
  const std::vector<float> x = values(d, 11);
  for (tag t : {tag::nchw, tag::nhwc, tag::nChw8c}) {
    const memory m = in_layout(x, d, t);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const Stats one = run(m, 24);
    omp_set_num_threads(2);
    const Stats two = run(m, 24);
    omp_set_num_threads(threads);
    CHECK(one.mean == two.mean);
    CHECK(one.variance == two.variance);
  }
}

TEST_CASE("BatchStats: other layouts and types are oneDNN's", "[nn][batchnorm]") {
  const memory::dims d{2, 8, 4, 4};
  CHECK(BatchStats::supports({d, memory::data_type::f32, tag::nChw8c}));
  CHECK_FALSE(BatchStats::supports({d, memory::data_type::bf16, tag::nChw8c}));
  CHECK_FALSE(BatchStats::supports({d, memory::data_type::f32, tag::cdba}));
  CHECK_FALSE(BatchStats::supports({{2, 8}, memory::data_type::f32, tag::nc}));
  const memory other({d, memory::data_type::f32, tag::cdba}, DnnlContext::get().engine());
  std::vector<float> mean(8), variance(8);
  CHECK_THROWS_AS(BatchStats::compute(other, mean.data(), variance.data()), std::logic_error);
}
