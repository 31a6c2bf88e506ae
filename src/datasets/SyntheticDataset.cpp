// Synthetic data: class means uniform in [0, 255] per pixel, triangular noise of
// half-width 96 (std ~39), labels uniform over the classes.
#include "datasets/SyntheticDataset.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "common/MemoryBudget.h"
#include "common/Random.h"

namespace ringtrain {
namespace {

constexpr float kNoiseHalfWidth = 96.0f;
constexpr std::size_t kMaxNumel = std::size_t{1} << 20;

}  // namespace

std::unique_ptr<ImageDataset> make_synthetic(ImageShape shape, int classes, std::size_t count, std::uint64_t seed,
                                             int split) {
  if (shape.channels <= 0 || shape.height <= 0 || shape.width <= 0 || shape.numel() > kMaxNumel)
    throw std::invalid_argument(fmt::format("synthetic dataset: invalid sample shape {}", shape.str()));
  if (classes < 1 || classes > 256)
    throw std::invalid_argument(fmt::format("synthetic dataset: classes must be in 1..256, got {}", classes));
  if (count == 0) throw std::invalid_argument("synthetic dataset: the sample count must be positive");
  const std::size_t numel = shape.numel();
  const auto synthetic = static_cast<std::uint64_t>(RngPurpose::kSynthetic);
  std::vector<std::uint8_t> means(static_cast<std::size_t>(classes) * numel);
  for (int k = 0; k < classes; ++k) {
    Rng rng(derive_seed(seed, {synthetic, 0xC1A55ULL, static_cast<std::uint64_t>(k)}));
    for (std::size_t p = 0; p < numel; ++p) means[k * numel + p] = static_cast<std::uint8_t>(rng.below(256));
  }
  std::vector<std::uint8_t> pixels(count * numel), labels(count);
  for (std::size_t i = 0; i < count; ++i) {
    Rng rng(derive_seed(seed, {synthetic, static_cast<std::uint64_t>(split), i}));
    const auto k = static_cast<std::size_t>(rng.below(static_cast<std::uint64_t>(classes)));
    labels[i] = static_cast<std::uint8_t>(k);
    const std::uint8_t* mean = means.data() + k * numel;
    std::uint8_t* dst = pixels.data() + i * numel;
    for (std::size_t p = 0; p < numel; ++p) {
      const float noise = (rng.uniform() + rng.uniform() - 1.0f) * kNoiseHalfWidth;
      dst[p] = static_cast<std::uint8_t>(std::clamp(static_cast<float>(mean[p]) + noise + 0.5f, 0.0f, 255.0f));
    }
  }
  return std::make_unique<ImageDataset>(shape, classes, std::move(pixels), std::move(labels), std::vector<std::string>{},
                                        fmt::format("synthetic(seed={}, split={})", seed, split == 0 ? "train" : "test"));
}

DatasetSplits load_synthetic_dataset(const DatasetConfig& config) {
  // Both splits are generated in memory (uint8 pixels and a label per sample): check the
  // sizes the flags ask for before allocating anything.
  const auto bytes_of = [&](std::size_t count) {
    return saturating_product({count, config.synthetic_shape.numel() + 1});
  };
  require_memory(bytes_of(config.synthetic_train),
                 fmt::format("--synthetic-train {} ({} samples of {} bytes)", config.synthetic_train,
                             config.synthetic_train, config.synthetic_shape.numel() + 1));
  require_memory(bytes_of(config.synthetic_test),
                 fmt::format("--synthetic-test {} ({} samples of {} bytes)", config.synthetic_test,
                             config.synthetic_test, config.synthetic_shape.numel() + 1));
  DatasetSplits splits;
  splits.train = make_synthetic(config.synthetic_shape, config.synthetic_classes, config.synthetic_train, config.seed, 0);
  splits.test = make_synthetic(config.synthetic_shape, config.synthetic_classes, config.synthetic_test, config.seed, 1);
  return splits;
}

}  // namespace ringtrain
