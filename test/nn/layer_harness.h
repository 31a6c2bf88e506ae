// Test support: runs one Layer on plain buffers (reordering to and from the layouts the
// layer picked) and compares it with a naive double-precision reference, whose central
// differences (in double) serve as the reference gradients (check_layer does both).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <oneapi/dnnl/dnnl.hpp>

#include "common/Random.h"
#include "nn/DnnlContext.h"
#include "nn/Layer.h"

namespace ringtrain::test {

using Vec = std::vector<double>;
using RefForward = std::function<Vec(const Vec& x, const std::vector<Vec>& params)>;

// The forward and backward-data primitive descriptors of a channels -> channels 3x3
// convolution (stride 1, padding 1) on batch x channels x side x side, every layout left to
// oneDNN (`any`): tests of the weight copies between the two layouts the primitives pick.
struct ConvPds {
  dnnl::convolution_forward::primitive_desc fwd;
  dnnl::convolution_backward_data::primitive_desc bwd_data;
};

inline ConvPds conv3x3_forward_and_backward_data(dnnl::memory::data_type type, dnnl::memory::dim batch,
                                                 dnnl::memory::dim channels, dnnl::memory::dim side) {
  using dnnl::memory;
  auto& eng = DnnlContext::get().engine();
  const memory::dims src{batch, channels, side, side}, wd{channels, channels, 3, 3}, one{1, 1};
  const memory::desc src_any(src, type, memory::format_tag::any), w_any(wd, type, memory::format_tag::any);
  dnnl::convolution_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src_any, w_any, src_any, one, one, one},
      eng);
  dnnl::convolution_backward_data::primitive_desc bwd(
      {dnnl::algorithm::convolution_direct, src_any, w_any, src_any, one, one, one}, eng, fwd);
  return {fwd, bwd};
}

inline std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float lo = -1.f, float hi = 1.f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform(lo, hi);
  return v;
}

inline Vec to_double(const std::vector<float>& v) { return Vec(v.begin(), v.end()); }

// max |a - b| / max |b|: the relative error the tests state and bound.
inline double rel_error(const std::vector<float>& a, const Vec& b) {
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / std::max(scale, 1e-30);
}

struct LayerRun {
  std::vector<float> y, dx;
  std::vector<std::vector<float>> dparams;
};

// Forward (and, in the train phase, backward with diff_dst dy) of `layer` on x of shape
// in, given in layout src_tag (plain or blocked, e.g. nChw16c). Grads are pre-filled with
// garbage to check that backward overwrites them.
inline LayerRun run_layer(Layer& layer, const Dims& in, const std::vector<float>& x,
                          const std::vector<std::vector<float>>& params, const std::vector<float>& dy, Phase phase,
                          dnnl::memory::format_tag src_tag = dnnl::memory::format_tag::undef, float* buffers = nullptr,
                          std::uint64_t seed = 0) {
  using dnnl::memory;
  auto& eng = DnnlContext::get().engine();
  auto& strm = DnnlContext::get().stream();
  std::vector<Tensor> p, g;
  const auto specs = layer.param_specs();
  for (std::size_t i = 0; i < specs.size(); ++i) {
    p.emplace_back(specs[i].dims);
    g.emplace_back(specs[i].dims);
    std::copy(params.at(i).begin(), params.at(i).end(), p.back().data());
    std::fill(g.back().data(), g.back().data() + g.back().numel(), 12345.f);
  }
  layer.bind_params(p, g);
  if (buffers) layer.bind_buffers(buffers);
  const memory::desc in_md = src_tag == memory::format_tag::undef
                                 ? plain_md(in)
                                 : memory::desc(memory::dims(in.begin(), in.end()), memory::data_type::f32, src_tag);
  layer.prepare(in_md, phase, true);
  const Dims out = layer.out_shape(in);
  std::vector<float> xcopy = x;
  memory x_user(plain_md(in), eng, xcopy.data());
  memory src(layer.src_md(), eng), dst(layer.dst_md(), eng);
  dnnl::reorder(x_user, src).execute(strm, x_user, src);
  layer.forward(src, dst, phase, seed);
  LayerRun r;
  r.y.resize(numel(out));
  memory y_user(plain_md(out), eng, r.y.data());
  dnnl::reorder(dst, y_user).execute(strm, dst, y_user);
  strm.wait();
  if (phase == Phase::kTrain && !dy.empty()) {
    std::vector<float> dycopy = dy;
    memory dy_user(plain_md(out), eng, dycopy.data());
    memory diff_dst(layer.diff_dst_md(), eng), diff_src(layer.diff_src_md(), eng);
    dnnl::reorder(dy_user, diff_dst).execute(strm, dy_user, diff_dst);
    layer.backward(diff_dst, diff_src);
    r.dx.resize(x.size());
    memory dx_user(plain_md(in), eng, r.dx.data());
    dnnl::reorder(diff_src, dx_user).execute(strm, diff_src, dx_user);
    strm.wait();
    for (auto& t : g) r.dparams.emplace_back(t.data(), t.data() + t.numel());
  }
  return r;
}

// Gradients of L = sum(ref(x, p) * dy) by central differences in double.
struct RefGrads {
  Vec y, dx;
  std::vector<Vec> dparams;
};

inline RefGrads reference_grads(const RefForward& ref, const Vec& x, const std::vector<Vec>& params, const Vec& dy,
                                double eps = 1e-6) {
  auto loss = [&](const Vec& xx, const std::vector<Vec>& pp) {
    const Vec y = ref(xx, pp);
    double l = 0.0;
    for (std::size_t i = 0; i < y.size(); ++i) l += y[i] * dy[i];
    return l;
  };
  RefGrads r;
  r.y = ref(x, params);
  Vec xx = x;
  r.dx.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = xx[i];
    xx[i] = v + eps;
    const double lp = loss(xx, params);
    xx[i] = v - eps;
    const double lm = loss(xx, params);
    xx[i] = v;
    r.dx[i] = (lp - lm) / (2 * eps);
  }
  std::vector<Vec> pp = params;
  for (std::size_t k = 0; k < params.size(); ++k) {
    r.dparams.emplace_back(params[k].size());
    for (std::size_t i = 0; i < params[k].size(); ++i) {
      const double v = pp[k][i];
      pp[k][i] = v + eps;
      const double lp = loss(x, pp);
      pp[k][i] = v - eps;
      const double lm = loss(x, pp);
      pp[k][i] = v;
      r.dparams[k][i] = (lp - lm) / (2 * eps);
    }
  }
  return r;
}

constexpr double kForwardTol = 1e-5;   // float accumulation over <= a few hundred terms
constexpr double kBackwardTol = 1e-4;  // float backward vs double central differences

// Runs the layer (train phase; x and diff_dst uniform in [-1, 1) from seed) and checks
// forward, diff_src and parameter gradients against ref and its central differences.
inline void check_layer(Layer& layer, const Dims& in, const RefForward& ref,
                        const std::vector<std::vector<float>>& params,
                        dnnl::memory::format_tag src_tag = dnnl::memory::format_tag::undef, std::uint64_t seed = 1,
                        double bwd_tol = kBackwardTol) {
  const auto x = random_floats(numel(in), seed);
  const auto dy = random_floats(numel(layer.out_shape(in)), seed + 100);
  const LayerRun got = run_layer(layer, in, x, params, dy, Phase::kTrain, src_tag);
  std::vector<Vec> pd;
  for (const auto& p : params) pd.push_back(to_double(p));
  const RefGrads want = reference_grads(ref, to_double(x), pd, to_double(dy));
  INFO(layer.describe() << " input " << dims_str(in));
  const double ey = rel_error(got.y, want.y);
  const double edx = rel_error(got.dx, want.dx);
  INFO("forward rel error " << ey << ", diff_src rel error " << edx);
  CHECK(ey < kForwardTol);
  CHECK(edx < bwd_tol);
  REQUIRE(got.dparams.size() == params.size());
  for (std::size_t k = 0; k < params.size(); ++k) {
    const double ep = rel_error(got.dparams[k], want.dparams[k]);
    INFO("param " << k << " gradient rel error " << ep);
    CHECK(ep < bwd_tol);
  }
}

}  // namespace ringtrain::test
