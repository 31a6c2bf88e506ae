// bn_stats_bench: what BatchNorm2d's training forward costs with oneDNN's own batch statistics
// against BatchStats' plus the forward that takes them (use_global_stats), on nChw8c tensors,
// run by hand, e.g.
//   cmake --build build --target bn_stats_bench
//   OMP_NUM_THREADS=1 build/test/nn/bn_stats_bench [N C H W ...] [--repeats R]
// Default shapes: resnet20's at 28x28, batch 64, and two of resnet50's at batch 16. The two
// sides alternate within each repeat; each prints its best time. Not a test: ctest does not run it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <unordered_map>
#include <vector>

#include "nn/BatchStats.h"
#include "bench_args.h"
#include "nn/DnnlContext.h"

using dnnl::memory;
using flags = dnnl::normalization_flags;

int main(int argc, char** argv) {
  std::vector<memory::dims> shapes;
  int repeats = 50;
  std::vector<long> numbers;
  if (!ringtrain::test::parse_bench_args(argc, argv, "bn_stats_bench [N C H W ...] [--repeats R]", numbers, repeats)) return 2;
  for (std::size_t i = 0; i < numbers.size(); i += 4) shapes.push_back({numbers[i], numbers[i + 1], numbers[i + 2], numbers[i + 3]});
  if (shapes.empty()) shapes = {{64, 16, 28, 28}, {64, 32, 14, 14}, {64, 64, 7, 7}, {16, 64, 56, 56}, {16, 256, 14, 14}};

  auto& eng = ringtrain::DnnlContext::get().engine();
  auto& stream = ringtrain::DnnlContext::get().stream();
  std::printf("shape, best of %d: oneDNN training forward | BatchStats + global-stats forward (ms), ratio\n", repeats);
  for (const memory::dims& d : shapes) {
    const memory::desc md(d, memory::data_type::f32, memory::format_tag::nChw8c);
    memory src(md, eng), dst(md, eng);
    auto* x = static_cast<float*>(src.get_data_handle());
    for (std::size_t i = 0; i < md.get_size() / sizeof(float); ++i) x[i] = static_cast<float>(i % 97) * 0.01f;
    const memory::desc c_md({d[1]}, memory::data_type::f32, memory::format_tag::x);
    memory mean(c_md, eng), variance(c_md, eng), scale(c_md, eng), shift(c_md, eng);
    const flags f = flags::use_scale | flags::use_shift | flags::fuse_norm_relu;
    const dnnl::batch_normalization_forward::primitive_desc own_pd(
        {dnnl::prop_kind::forward_training, md, 1e-5f, f}, eng);
    const dnnl::batch_normalization_forward::primitive_desc given_pd(
        {dnnl::prop_kind::forward_training, md, 1e-5f, f | flags::use_global_stats}, eng);
    memory workspace(own_pd.workspace_desc(), eng);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src},   {DNNL_ARG_DST, dst},           {DNNL_ARG_SCALE, scale},
                                         {DNNL_ARG_SHIFT, shift}, {DNNL_ARG_MEAN, mean},        {DNNL_ARG_VARIANCE, variance},
                                         {DNNL_ARG_WORKSPACE, workspace}};
    const dnnl::batch_normalization_forward own(own_pd), given(given_pd);
    const auto seconds = [](const std::function<void()>& f) {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    double best_own = 1e30, best_given = 1e30;
    for (int r = 0; r < repeats; ++r) {
      best_own = std::min(best_own, seconds([&] {
                            own.execute(stream, args);
                            stream.wait();
                          }));
      best_given = std::min(best_given, seconds([&] {
                              ringtrain::BatchStats::compute(src, static_cast<float*>(mean.get_data_handle()),
                                                             static_cast<float*>(variance.get_data_handle()));
                              given.execute(stream, args);
                              stream.wait();
                            }));
    }
    std::printf("%ldx%ldx%ldx%ld: %.3f | %.3f, %.2f\n", static_cast<long>(d[0]), static_cast<long>(d[1]),
                static_cast<long>(d[2]), static_cast<long>(d[3]), 1e3 * best_own, 1e3 * best_given,
                best_given / best_own);
  }
  return 0;
}
