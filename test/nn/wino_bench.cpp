// wino_bench: the three passes of a 3x3 convolution (stride 1, padding 1, fp32, nChw8c), oneDNN
// 2.6's direct kernels against nn's own (winograd::Conv3x3; pixelpair::Conv3x3 for images of at
// most 2x2, as Conv2d picks), run by hand, e.g.
//   cmake --build build --target wino_bench
//   OMP_NUM_THREADS=1 build/test/nn/wino_bench [N C K H ...] [--repeats R]
// Default shapes: the 3x3 convolutions of resnet50 (batch 16) and resnet18 (batch 32) at 224,
// and resnet20's at 32x32 (batch 128). The sides alternate within each repeat; each prints its
// best time per pass (the forward's includes converting the weights for it and for
// backward-data, as a training step does; backward-weights' the gradient back into plain), and
// the largest difference of nn's results from oneDNN's relative to the largest magnitude of
// oneDNN's. Not a test: ctest does not run it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "bench_args.h"
#include "nn/ConvPrimitives.h"
#include "nn/DnnlContext.h"
#include "nn/PixelPairConv.h"
#include "nn/Winograd.h"

using dnnl::memory;
using tag = memory::format_tag;

namespace {

double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

float* data(const memory& m) { return static_cast<float*>(m.get_data_handle()); }

// max |a - b| / max |b|
double relative_diff(const float* a, const float* b, std::size_t n) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  std::vector<long> numbers;
  if (!ringtrain::test::parse_bench_args(argc, argv, "wino_bench [N C K H ...] [--repeats R]", numbers, repeats)) return 2;
  if (numbers.empty())
    numbers = {16, 64, 64, 56, 16, 128, 128, 28, 16, 256, 256, 14, 16, 512, 512, 7,  32, 64, 64, 56,
               32, 128, 128, 28, 32, 256, 256, 14, 32, 512, 512, 7, 128, 16, 16, 32, 128, 32, 32, 16, 128, 64, 64, 8};
  auto& eng = ringtrain::DnnlContext::get().engine();
  auto& stream = ringtrain::DnnlContext::get().stream();
  std::printf("N C K H, best of %d (ms): forward, backward-data, backward-weights as oneDNN | nn's own, Winograd or "
              "pixel pairs at H <= 2 (ratio); "
              "relative differences\n",
              repeats);
  double total_direct = 0, total_wino = 0;
  for (std::size_t s = 0; s < numbers.size(); s += 4) {
    const long n = numbers[s], c = numbers[s + 1], k = numbers[s + 2], h = numbers[s + 3];
    const memory::desc src_md({n, c, h, h}, memory::data_type::f32, tag::nChw8c),
        dst_md({n, k, h, h}, memory::data_type::f32, tag::nChw8c),
        w_plain({k, c, 3, 3}, memory::data_type::f32, tag::oihw),
        w_any({k, c, 3, 3}, memory::data_type::f32, tag::any);
    const memory::dims one{1, 1}, zero{0, 0};
    const dnnl::convolution_forward::primitive_desc fwd_pd(
        {dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src_md, w_any, dst_md, one, zero, one,
         one},
        eng);
    const dnnl::convolution_backward_data::primitive_desc bwd_pd(
        {dnnl::algorithm::convolution_direct, src_md, w_any, dst_md, one, zero, one, one}, eng, fwd_pd);
    // Backward-weights as Conv2d asks for it (its layout search; on 2x2 images the forward's
    // nChw8c has only a reference kernel, 400x slower), with the activations' reorders.
    int wino_passes = 0;
    const auto bww_pd = ringtrain::conv::backward_weights_pd(dnnl::algorithm::convolution_direct, src_md, dst_md, w_any,
                                                             memory::desc(), {one, zero, one}, fwd_pd, wino_passes);
    memory bww_src(bww_pd.src_desc(), eng), bww_diff_dst(bww_pd.diff_dst_desc(), eng);
    memory src(src_md, eng), dst(dst_md, eng), diff_dst(dst_md, eng), diff_src(src_md, eng), w(w_plain, eng),
        dw(w_plain, eng), w_fwd(fwd_pd.weights_desc(), eng), w_bwd(bwd_pd.weights_desc(), eng),
        dw_blk(bww_pd.diff_weights_desc(), eng);
    memory wdst(dst_md, eng), wdiff_src(src_md, eng), wdw(w_plain, eng);
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.f, 1.f);
    for (const memory* m : {&src, &diff_dst, &w}) {
      float* p = data(*m);
      for (std::size_t i = 0; i < m->get_desc().get_size() / sizeof(float); ++i) p[i] = normal(rng);
    }
    const dnnl::convolution_forward fwd(fwd_pd);
    const dnnl::convolution_backward_data bwd(bwd_pd);
    const dnnl::convolution_backward_weights bww(bww_pd);
    // nn's own side: the kernel Conv2d would pick for this image size.
    const bool pairs = h <= 2;
    std::unique_ptr<ringtrain::winograd::Conv3x3> wino;
    std::unique_ptr<ringtrain::winograd::Weights> ww;
    std::unique_ptr<ringtrain::pixelpair::Conv3x3> pp;
    std::unique_ptr<ringtrain::pixelpair::Weights> pw;
    if (pairs) {
      pp = std::make_unique<ringtrain::pixelpair::Conv3x3>(ringtrain::pixelpair::Shape{n, c, k, h, h});
      pw = std::make_unique<ringtrain::pixelpair::Weights>(c, k);
    } else {
      wino = std::make_unique<ringtrain::winograd::Conv3x3>(ringtrain::winograd::Shape{n, c, k, h, h});
      ww = std::make_unique<ringtrain::winograd::Weights>(c, k);
    }
    double best[2][3] = {{1e9, 1e9, 1e9}, {1e9, 1e9, 1e9}};
    for (int r = 0; r < repeats; ++r) {
      best[0][0] = std::min(best[0][0], seconds([&] {
        dnnl::reorder(w, w_fwd).execute(stream, w, w_fwd);
        dnnl::reorder(w, w_bwd).execute(stream, w, w_bwd);
        fwd.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w_fwd}, {DNNL_ARG_DST, dst}});
        stream.wait();
      }));
      best[1][0] = std::min(best[1][0], seconds([&] {
        if (pairs) {
          pw->set(data(w));
          pp->forward(*pw, data(src), data(wdst), nullptr, false);
        } else {
          ww->set(data(w));
          wino->forward(*ww, data(src), data(wdst), nullptr, false);
        }
      }));
      best[0][1] = std::min(best[0][1], seconds([&] {
        bwd.execute(stream, {{DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_WEIGHTS, w_bwd}, {DNNL_ARG_DIFF_SRC, diff_src}});
        stream.wait();
      }));
      best[1][1] = std::min(best[1][1], seconds([&] {
        if (pairs)
          pp->backward_data(*pw, data(diff_dst), data(wdiff_src));
        else
          wino->backward_data(*ww, data(diff_dst), data(wdiff_src));
      }));
      best[0][2] = std::min(best[0][2], seconds([&] {
        memory s_in = src, dd_in = diff_dst;
        if (bww_pd.src_desc() != src_md) {
          dnnl::reorder(src, bww_src).execute(stream, src, bww_src);
          s_in = bww_src;
        }
        if (bww_pd.diff_dst_desc() != dst_md) {
          dnnl::reorder(diff_dst, bww_diff_dst).execute(stream, diff_dst, bww_diff_dst);
          dd_in = bww_diff_dst;
        }
        bww.execute(stream, {{DNNL_ARG_SRC, s_in}, {DNNL_ARG_DIFF_DST, dd_in}, {DNNL_ARG_DIFF_WEIGHTS, dw_blk}});
        dnnl::reorder(dw_blk, dw).execute(stream, dw_blk, dw);
        stream.wait();
      }));
      best[1][2] = std::min(best[1][2], seconds([&] {
        if (pairs)
          pp->backward_weights(data(src), data(diff_dst), data(wdw), nullptr);
        else
          wino->backward_weights(data(src), data(diff_dst), data(wdw), nullptr);
      }));
    }
    const std::size_t ny = dst_md.get_size() / 4, nx = src_md.get_size() / 4, nw = w_plain.get_size() / 4;
    std::printf("%ld %ld %ld %ld:", n, c, k, h);
    for (int p = 0; p < 3; ++p) {
      std::printf("  %.2f | %.2f (%.2f)", best[0][p] * 1e3, best[1][p] * 1e3, best[0][p] / best[1][p]);
      total_direct += best[0][p];
      total_wino += best[1][p];
    }
    std::printf(";  %.1e %.1e %.1e\n", relative_diff(data(wdst), data(dst), ny),
                relative_diff(data(wdiff_src), data(diff_src), nx), relative_diff(data(wdw), data(dw), nw));
  }
  std::printf("all passes: oneDNN %.1f ms, nn's own %.1f ms, ratio %.2f\n", total_direct * 1e3, total_wino * 1e3,
              total_direct / total_wino);
  return 0;
}
