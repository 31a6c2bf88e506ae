// Synthetic data, normalisation, augmentation and load_batch.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "datasets/Dataset.h"
#include "datasets/ImageDataset.h"
#include "datasets/SyntheticDataset.h"

using namespace ringtrain;

namespace {

DatasetConfig synthetic_config(ImageShape shape, bool augment = false) {
  DatasetConfig c;
  c.name = "synthetic";
  c.seed = 42;
  c.synthetic_shape = shape;
  c.synthetic_classes = 5;
  c.synthetic_train = 400;
  c.synthetic_test = 100;
  c.augment = augment;
  return c;
}

std::vector<float> sample(const Dataset& d, std::size_t i) {
  std::vector<float> x(d.shape().numel());
  d.get(i, x.data());
  return x;
}

}  // namespace

TEST_CASE("synthetic data is seeded, shaped as asked and learnable", "[synthetic]") {
  const ImageShape shape{2, 6, 5};
  auto a = make_synthetic(shape, 5, 400, 42, 0);
  auto b = make_synthetic(shape, 5, 400, 42, 0);
  auto c = make_synthetic(shape, 5, 400, 43, 0);
  REQUIRE(a->shape() == shape);
  REQUIRE(a->size() == 400);
  CHECK(std::equal(a->pixels().begin(), a->pixels().end(), b->pixels().begin()));
  CHECK(!std::equal(a->pixels().begin(), a->pixels().end(), c->pixels().begin()));
  std::set<int> seen;
  for (std::size_t i = 0; i < a->size(); ++i) {
    REQUIRE(a->label(i) >= 0);
    REQUIRE(a->label(i) < 5);
    seen.insert(a->label(i));
  }
  CHECK(seen.size() == 5);

  // Learnable: a nearest-class-mean classifier fitted on train classifies test well.
  auto test = make_synthetic(shape, 5, 200, 42, 1);
  const std::size_t n = shape.numel();
  std::vector<double> means(5 * n, 0.0);
  std::vector<int> counts(5, 0);
  for (std::size_t i = 0; i < a->size(); ++i) {
    const auto x = sample(*a, i);
    ++counts[a->label(i)];
    for (std::size_t p = 0; p < n; ++p) means[a->label(i) * n + p] += x[p];
  }
  for (int k = 0; k < 5; ++k)
    for (std::size_t p = 0; p < n; ++p) means[k * n + p] /= counts[k];
  int correct = 0;
  for (std::size_t i = 0; i < test->size(); ++i) {
    const auto x = sample(*test, i);
    int best = -1;
    double best_d = 1e300;
    for (int k = 0; k < 5; ++k) {
      double d = 0;
      for (std::size_t p = 0; p < n; ++p) d += (x[p] - means[k * n + p]) * (x[p] - means[k * n + p]);
      if (d < best_d) best_d = d, best = k;
    }
    correct += best == test->label(i);
  }
  CHECK(correct >= 190);  // of 200; chance is 40
}

TEST_CASE("synthetic config errors are invalid_argument", "[synthetic]") {
  CHECK_THROWS_AS(make_synthetic({0, 4, 4}, 3, 10, 1, 0), std::invalid_argument);
  CHECK_THROWS_AS(make_synthetic({1, 4, 4}, 0, 10, 1, 0), std::invalid_argument);
  CHECK_THROWS_AS(make_synthetic({1, 4, 4}, 3, 0, 1, 0), std::invalid_argument);
}

TEST_CASE("channel_stats matches a double-precision computation", "[normalise]") {
  auto d = make_synthetic({3, 7, 9}, 4, 50, 3, 0);
  const ChannelStats s = d->channel_stats();
  const std::size_t hw = 63;
  for (std::size_t c = 0; c < 3; ++c) {
    double sum = 0, sumsq = 0;
    for (std::size_t i = 0; i < d->size(); ++i)
      for (std::size_t p = 0; p < hw; ++p) {
        const double v = d->pixels()[i * 189 + c * hw + p] / 255.0;
        sum += v;
        sumsq += v * v;
      }
    const double m = sum / (50.0 * hw);
    CHECK(s.mean[c] == Approx(m).epsilon(1e-12));
    CHECK(s.std[c] == Approx(std::sqrt(sumsq / (50.0 * hw) - m * m)).epsilon(1e-9));
  }
}

TEST_CASE("normalised training set has per-channel mean ~0 and std ~1", "[normalise]") {
  auto splits = load_dataset(synthetic_config({3, 8, 8}));
  const auto& train = *splits.train;
  std::vector<double> sum(3, 0), sumsq(3, 0);
  for (std::size_t i = 0; i < train.size(); ++i) {
    const auto x = sample(train, i);
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t p = 0; p < 64; ++p) {
        sum[c] += x[c * 64 + p];
        sumsq[c] += x[c * 64 + p] * x[c * 64 + p];
      }
  }
  const double n = train.size() * 64.0;
  for (std::size_t c = 0; c < 3; ++c) {
    const double m = sum[c] / n;
    CHECK(std::abs(m) < 1e-5);
    CHECK(std::sqrt(sumsq[c] / n - m * m) == Approx(1.0).epsilon(1e-5));
  }
  // The test split uses the training statistics (it is not re-centred on itself).
  const auto& test = dynamic_cast<const ImageDataset&>(*splits.test);
  const auto& tr = dynamic_cast<const ImageDataset&>(train);
  CHECK(test.norm_mean() == tr.norm_mean());
  CHECK(test.norm_std() == tr.norm_std());
}

TEST_CASE("given mean/std are applied as (x/255 - mean)/std", "[normalise]") {
  DatasetConfig c = synthetic_config({3, 4, 4});
  c.norm_mean = {0.5f, 0.25f, 0.125f};
  c.norm_std = {0.5f, 0.25f, 2.0f};
  auto splits = load_dataset(c);
  const auto& img = dynamic_cast<const ImageDataset&>(*splits.test);
  const auto x = sample(img, 3);
  for (std::size_t c2 = 0; c2 < 3; ++c2)
    for (std::size_t p = 0; p < 16; ++p) {
      const double raw = img.pixels()[3 * 48 + c2 * 16 + p] / 255.0;
      CHECK(x[c2 * 16 + p] == Approx((raw - c.norm_mean[c2]) / c.norm_std[c2]).epsilon(1e-6));
    }
  c.norm_std = {1.0f, 1.0f};
  CHECK_THROWS_AS(load_dataset(c), std::invalid_argument);
  c.norm_std.clear();
  CHECK_THROWS_AS(load_dataset(c), std::invalid_argument);
}

TEST_CASE("augmentation: deterministic per key, varies across keys, identity for key 0", "[augment]") {
  auto splits = load_dataset(synthetic_config({3, 32, 32}, true));
  const auto& train = dynamic_cast<const ImageDataset&>(*splits.train);
  const std::size_t n = train.shape().numel();
  std::vector<float> a(n), b(n), plain(n);
  int differ_across_keys = 0;
  for (std::size_t i = 0; i < 20; ++i) {
    train.get(i, plain.data());
    train.get_augmented(i, a.data(), 0);
    REQUIRE(a == plain);
    train.get_augmented(i, a.data(), 7);
    train.get_augmented(i, b.data(), 7);
    REQUIRE(a == b);
    train.get_augmented(i, b.data(), 8);
    differ_across_keys += a != b;

    // Reference: pad the uint8 image by 4 with zeros, crop at (4+dy, 4+dx), flip, normalise.
    const AugmentParams p = augment_params(7, i);
    std::vector<int> padded(3 * 40 * 40, 0);
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) padded[(c * 40 + y + 4) * 40 + x + 4] = train.pixels()[i * n + (c * 32 + y) * 32 + x];
    int wrong = 0;
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) {
          const int cx = p.flip ? 31 - x : x;
          const int v = padded[(c * 40 + y + 4 + p.dy) * 40 + cx + 4 + p.dx];
          const double expect = (v / 255.0 - train.norm_mean()[c]) / train.norm_std()[c];
          if (std::abs(a[(c * 32 + y) * 32 + x] - expect) > 1e-5) ++wrong;
        }
    CHECK(wrong == 0);
  }
  CHECK(differ_across_keys >= 18);

  // The test split is never augmented.
  const auto& test = dynamic_cast<const ImageDataset&>(*splits.test);
  CHECK(!test.augment());
  test.get(0, plain.data());
  test.get_augmented(0, a.data(), 7);
  CHECK(a == plain);
}

TEST_CASE("augment parameters cover every offset in [-4, 4] and both flips", "[augment]") {
  std::set<int> dys, dxs, flips;
  for (std::size_t i = 0; i < 2000; ++i) {
    const AugmentParams p = augment_params(99, i);
    dys.insert(p.dy);
    dxs.insert(p.dx);
    flips.insert(p.flip);
  }
  CHECK(dys == std::set<int>{-4, -3, -2, -1, 0, 1, 2, 3, 4});
  CHECK(dxs == dys);
  CHECK(flips.size() == 2);
}

TEST_CASE("load_batch writes samples and labels in index order", "[batch]") {
  auto splits = load_dataset(synthetic_config({3, 32, 32}, true));
  const auto& train = *splits.train;
  const std::size_t n = train.shape().numel();
  const std::vector<std::size_t> idx{5, 0, 399, 5};
  std::vector<float> dst(idx.size() * n);
  std::vector<std::int32_t> labels(idx.size());
  load_batch(train, idx, dst.data(), labels.data(), 11);
  std::vector<float> one(n);
  for (std::size_t k = 0; k < idx.size(); ++k) {
    CHECK(labels[k] == train.label(idx[k]));
    dynamic_cast<const ImageDataset&>(train).get_augmented(idx[k], one.data(), 11);
    CHECK(std::equal(one.begin(), one.end(), dst.begin() + k * n));
  }
  // Same index, same key: same augmented sample, wherever it sits in the batch.
  CHECK(std::equal(dst.begin(), dst.begin() + n, dst.begin() + 3 * n));
  const std::vector<std::size_t> bad{400};
  CHECK_THROWS_AS(load_batch(train, bad, dst.data(), labels.data()), std::out_of_range);
}
