// IDX reader: valid raw and .gz files give the written values; every malformed file gives
// an error naming the file and the problem.
#include <catch2/catch.hpp>

#include <cmath>

#include "dataset_test_util.h"
#include "datasets/Dataset.h"
#include "datasets/IdxReader.h"

using namespace ringtrain;
using namespace ringtrain::test;
using Catch::Matchers::Contains;

namespace {

// 3 images of 2x3, pixel (n, r, c) = 40n + 10r + c + 1.
Bytes sample_pixels() {
  Bytes p;
  for (int n = 0; n < 3; ++n)
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 3; ++c) p.push_back(static_cast<unsigned char>(40 * n + 10 * r + c + 1));
  return p;
}
const Bytes kLabels{7, 0, 9};

void write_mnist_dir(const TempDir& dir, bool gz) {
  auto put = [&](const std::string& name, const Bytes& b) {
    write_file(dir.file(name + (gz ? ".gz" : "")), gz ? gzip_bytes(b) : b);
  };
  put("train-images-idx3-ubyte", idx_images(3, 2, 3, sample_pixels()));
  put("train-labels-idx1-ubyte", idx_labels(kLabels));
  put("t10k-images-idx3-ubyte", idx_images(1, 2, 3, Bytes(6, 255)));
  put("t10k-labels-idx1-ubyte", idx_labels({4}));
}

}  // namespace

TEST_CASE("IDX raw files load with their values, unnormalised x/255 by default", "[idx]") {
  TempDir dir;
  write_file(dir.file("img"), idx_images(3, 2, 3, sample_pixels()));
  write_file(dir.file("lab"), idx_labels(kLabels));
  auto d = load_idx_split(dir.file("img"), dir.file("lab"), {});
  REQUIRE(d->size() == 3);
  REQUIRE(d->shape() == ImageShape{1, 2, 3});
  REQUIRE(d->classes() == 10);
  CHECK(d->label(0) == 7);
  CHECK(d->label(2) == 9);
  std::vector<float> x(6);
  d->get(2, x.data());
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) CHECK(x[r * 3 + c] == Approx((80 + 10 * r + c + 1) / 255.0));
}

TEST_CASE("IDX .gz files load through load_dataset, normalised with training statistics", "[idx]") {
  TempDir dir;
  write_mnist_dir(dir, true);
  DatasetConfig config;
  config.name = "mnist";
  config.data_dir = dir.str();
  auto splits = load_dataset(config);
  REQUIRE(splits.train->size() == 3);
  REQUIRE(splits.test->size() == 1);
  CHECK(splits.test->label(0) == 4);
  // Independent mean/std of the training pixels.
  const Bytes p = sample_pixels();
  double mean = 0, var = 0;
  for (auto v : p) mean += v / 255.0;
  mean /= p.size();
  for (auto v : p) var += (v / 255.0 - mean) * (v / 255.0 - mean);
  const double std = std::sqrt(var / p.size());
  std::vector<float> x(6);
  splits.train->get(1, x.data());
  CHECK(x[4] == Approx((p[6 + 4] / 255.0 - mean) / std).epsilon(1e-5));
  splits.test->get(0, x.data());
  CHECK(x[0] == Approx((1.0 - mean) / std).epsilon(1e-5));
}

TEST_CASE("IDX raw directory also loads (no .gz)", "[idx]") {
  TempDir dir;
  write_mnist_dir(dir, false);
  DatasetConfig config;
  config.name = "mnist";
  config.data_dir = dir.str();
  config.normalize = false;
  auto splits = load_dataset(config);
  REQUIRE(splits.train->size() == 3);
  std::vector<float> x(6);
  splits.train->get(0, x.data());
  CHECK(x[5] == Approx(13 / 255.0));
}

TEST_CASE("IDX errors name the file and the problem", "[idx]") {
  TempDir dir;
  const std::string img = dir.file("train-images-idx3-ubyte");
  const std::string lab = dir.file("train-labels-idx1-ubyte");

  SECTION("truncated .gz") {
    Bytes gz = gzip_bytes(idx_images(3, 2, 3, sample_pixels()));
    gz.resize(gz.size() - 6);
    write_file(img + ".gz", gz);
    REQUIRE_THROWS_WITH(read_idx_images(img + ".gz"), Contains(img + ".gz") && Contains("truncated"));
  }
  SECTION(".gz with a corrupted payload fails its CRC or length check") {
    Bytes gz = gzip_bytes(idx_images(3, 2, 3, sample_pixels()));
    gz[gz.size() - 8] ^= 0xff;  // first CRC-32 byte of the trailer
    write_file(img + ".gz", gz);
    REQUIRE_THROWS_WITH(read_idx_images(img + ".gz"), Contains(img + ".gz") && Contains("corrupt"));
  }
  SECTION("wrong magic: a labels file given as images") {
    write_file(img, idx_labels(kLabels));
    REQUIRE_THROWS_WITH(read_idx_images(img),
                        Contains(img) && Contains("wrong magic") && Contains("0x00000801") && Contains("labels file"));
  }
  SECTION("wrong magic on a labels file") {
    write_file(lab, idx_labels(kLabels, 0x12345678));
    REQUIRE_THROWS_WITH(read_idx_labels(lab), Contains(lab) && Contains("wrong magic number 0x12345678"));
  }
  SECTION("header dimensions disagree with the file size") {
    write_file(img, idx_images(4, 2, 3, sample_pixels()));  // says 4 images, holds 3
    REQUIRE_THROWS_WITH(read_idx_images(img), Contains(img) && Contains("header says 4 images of 2x3") &&
                                                  Contains("the file has 34 bytes"));
  }
  SECTION("header dimensions disagree with the gzip ISIZE") {
    write_file(img + ".gz", gzip_bytes(idx_images(3, 2, 4, sample_pixels())));
    REQUIRE_THROWS_WITH(read_idx_images(img + ".gz"),
                        Contains(img + ".gz") && Contains("gzip trailer") && Contains("truncated or corrupt"));
  }
  SECTION("trailing bytes after the images") {
    Bytes b = idx_images(3, 2, 3, sample_pixels());
    b.push_back(0);
    write_file(img, b);
    REQUIRE_THROWS_WITH(read_idx_images(img), Contains(img) && Contains("header says 3 images"));
  }
  SECTION("too short for a header") {
    write_file(img, Bytes{0, 0, 8});
    REQUIRE_THROWS_WITH(read_idx_images(img), Contains(img) && Contains("too short"));
  }
  SECTION("label out of range") {
    write_file(lab, idx_labels({1, 2, 10}));
    REQUIRE_THROWS_WITH(read_idx_labels(lab), Contains(lab) && Contains("label 10 at index 2 out of range"));
  }
  SECTION("image and label counts disagree") {
    write_file(img, idx_images(3, 2, 3, sample_pixels()));
    write_file(lab, idx_labels({1, 2}));
    REQUIRE_THROWS_WITH(load_idx_split(img, lab, {}), Contains(img) && Contains("3 images") && Contains("2 labels"));
  }
  SECTION("missing file names the path and the expected files") {
    DatasetConfig config;
    config.name = "mnist";
    config.data_dir = dir.str();
    REQUIRE_THROWS_WITH(load_dataset(config), Contains(dir.file("train-images-idx3-ubyte")) &&
                                                  Contains("t10k-labels-idx1-ubyte") && Contains("not found") &&
                                                  Contains("scripts/get-data.sh mnist DIR downloads it"));
    config.data_dir.clear();  // no default directory: a usage error that names the command too
    REQUIRE_THROWS_WITH(load_dataset(config), Contains("--data-dir DIR") && Contains("scripts/get-data.sh mnist DIR"));
  }
}

TEST_CASE("mnist without a data directory asks for --data-dir", "[idx]") {
  DatasetConfig config;
  config.name = "mnist";
  REQUIRE_THROWS_AS(load_dataset(config), std::invalid_argument);
  REQUIRE_THROWS_WITH(load_dataset(config), Contains("--data-dir") && Contains("train-images-idx3-ubyte"));
}

TEST_CASE("unknown dataset names are rejected listing the known ones", "[idx]") {
  DatasetConfig config;
  config.name = "imagenet";
  REQUIRE_THROWS_AS(load_dataset(config), std::invalid_argument);
  REQUIRE_THROWS_WITH(load_dataset(config), Contains("imagenet") && Contains("fashion-mnist") && Contains("svhn"));
  CHECK(dataset_names().size() == 7);
  CHECK_THROWS_WITH(load_dataset(config), Contains("folder") && Contains("packed"));
}
