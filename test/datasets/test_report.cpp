// DatasetReport: counts, histogram and channel statistics against direct computation.
#include <catch2/catch.hpp>

#include <cmath>

#include "datasets/DatasetReport.h"
#include "datasets/ImageDataset.h"

using namespace ringtrain;
using Catch::Matchers::Contains;

TEST_CASE("describe_dataset counts classes and computes channel statistics", "[report]") {
  DatasetConfig c;
  c.name = "synthetic";
  c.synthetic_shape = {2, 5, 5};
  c.synthetic_classes = 4;
  c.synthetic_train = 300;
  c.synthetic_test = 50;
  auto splits = load_dataset(c);
  const DatasetReport r = describe_dataset("synthetic", splits);
  CHECK(r.train.count == 300);
  CHECK(r.test.count == 50);
  CHECK(r.train.shape == ImageShape{2, 5, 5});
  REQUIRE(r.train.histogram.size() == 4);
  std::vector<std::size_t> hist(4, 0);
  for (std::size_t i = 0; i < splits.train->size(); ++i) ++hist[splits.train->label(i)];
  CHECK(r.train.histogram == hist);

  const auto& img = dynamic_cast<const ImageDataset&>(*splits.test);
  for (std::size_t ch = 0; ch < 2; ++ch) {
    double sum = 0, sumsq = 0;
    for (std::size_t i = 0; i < img.size(); ++i)
      for (std::size_t p = 0; p < 25; ++p) {
        const double v = img.pixels()[i * 50 + ch * 25 + p] / 255.0;
        sum += v;
        sumsq += v * v;
      }
    const double m = sum / (50 * 25.0), s = std::sqrt(sumsq / (50 * 25.0) - m * m);
    CHECK(r.test.raw_mean[ch] == Approx(m));
    CHECK(r.test.raw_std[ch] == Approx(s));
    // Normalised with the training statistics.
    CHECK(r.test.mean[ch] == Approx((m - img.norm_mean()[ch]) / img.norm_std()[ch]).margin(1e-6));
    CHECK(r.train.mean[ch] == Approx(0.0).margin(1e-5));
    CHECK(r.train.std[ch] == Approx(1.0).epsilon(1e-5));
  }
  const std::string text = format_dataset_report(r);
  CHECK_THAT(text, Contains("train: 300 samples of 2x5x5") && Contains("test: 50 samples") &&
                       Contains(std::to_string(hist[2])));
}
