// nn_bench: images/s of forward+backward (train) for a zoo model, run by hand, e.g.
//   OMP_NUM_THREADS=1 build/test/nn/nn_bench lenet5 1 28 28 64 [steps] [eval] [bf16]
// Not a test: it asserts nothing and ctest does not run it.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/Random.h"
#include "nn/Model.h"

int main(int argc, char** argv) {
  using namespace ringtrain;
  if (argc < 6) {
    std::fprintf(stderr, "usage: nn_bench MODEL C H W BATCH [STEPS] [eval] [bf16]\n");
    return 2;
  }
  const std::string name = argv[1];
  const ImageShape shape{std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4])};
  const int batch = std::atoi(argv[5]);
  int steps = 50;
  bool eval = false;
  Precision precision = Precision::kFp32;
  for (int i = 6; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "eval")
      eval = true;
    else if (a == "bf16" || a == "fp32")
      precision = parse_precision(a);
    else
      steps = std::atoi(argv[i]);
  }
  Model model(name, shape, 10);
  model.set_precision(precision);
  model.init(1);
  std::vector<float> x(static_cast<std::size_t>(batch) * shape.numel());
  std::vector<std::int32_t> y(batch);
  Rng rng(7);
  for (auto& v : x) v = rng.uniform(-1.f, 1.f);
  for (auto& v : y) v = static_cast<std::int32_t>(rng.below(10));
  auto step = [&] {
    model.forward(x.data(), y.data(), batch, eval ? Phase::kEval : Phase::kTrain, 3);
    if (eval) return;
    model.backward();
    (void)model.params();  // what the optimizer's update does: the bf16 weights convert once per step
  };
  for (int i = 0; i < 3; ++i) step();  // build primitives, warm caches
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s %s %s batch %d %s: %.1f images/s (%.3f ms/step, %.2f GFLOP/s fwd-equivalent x3)\n", name.c_str(),
              std::string(precision_name(precision)).c_str(), shape.str().c_str(), batch, eval ? "eval fwd" : "train fwd+bwd", steps * batch / s, 1e3 * s / steps,
              (eval ? 1 : 3) * model.flops_per_image() * batch * steps / s * 1e-9);
  return 0;
}
