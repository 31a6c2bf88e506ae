// --dataset folder: listing and split rules, shapes and channels from headers, crops drawn
// from (key, index) alone, every bad input named, and a Fashion-MNIST slice written as PNG
// giving exactly the IDX reader's floats.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "datasets/Dataset.h"
#include "datasets/FolderDataset.h"
#include "datasets/ImageFolder.h"
#include "datasets/dataset_test_util.h"
#include "datasets/folder_test_util.h"
#include "images/ImageDecoder.h"
#include "images/Resample.h"

using namespace ringtrain;
using namespace ringtrain::test;
namespace fs = std::filesystem;

namespace {

DatasetConfig folder_config(const std::string& dir) {
  DatasetConfig c;
  c.name = "folder";
  c.data_dir = dir;
  return c;
}

std::vector<float> augmented(const Dataset& d, std::size_t i, std::uint64_t key = 0) {
  std::vector<float> v(d.shape().numel());
  d.get_augmented(i, v.data(), key);
  return v;
}

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("Folder listing: sorted classes, recursive sorted files, image extensions in any case", "[folder]") {
  TempDir tmp;
  const fs::path dir = tmp.str();
  const auto px = ramp_image(4, 4, 1, 0);
  write_png(dir / "b" / "z.PNG", px, 4, 4, 1);
  write_png(dir / "b" / "sub" / "a.png", px, 4, 4, 1);
  write_jpeg(dir / "a" / "x.JpEg", px, 4, 4, 1);
  write_text(dir / "a" / "notes.txt", "not an image");
  write_text(dir / "stray.png", "not in a class folder");
  const FolderListing l = list_image_folder(dir.string());
  REQUIRE(l.class_names == std::vector<std::string>{"a", "b"});
  REQUIRE(l.files.size() == 3);
  CHECK(l.files[0].path == (dir / "a" / "x.JpEg").string());
  CHECK(l.files[0].label == 0);
  CHECK(l.files[1].path == (dir / "b" / "sub" / "a.png").string());
  CHECK(l.files[2].path == (dir / "b" / "z.PNG").string());
  CHECK(l.files[2].label == 1);

  fs::create_directories(dir / "c_empty");
  CHECK_THROWS_WITH(list_image_folder(dir.string()), Catch::Contains("c_empty") && Catch::Contains("class folder without images"));
  CHECK_THROWS_AS(list_image_folder((dir / "missing").string()), std::runtime_error);
}

TEST_CASE("Folder splits: train/ and val/, or an even deterministic fraction of one tree", "[folder]") {
  TempDir tmp;
  const fs::path dir = tmp.str();
  make_ramp_folder(dir / "one", "", 2, 10, 4, 4, 1);
  const FolderSplitListing s = list_folder_splits((dir / "one").string(), 0.2);
  CHECK(s.train.files.size() == 16);
  CHECK(s.val.files.size() == 4);  // 2 of each class's 10
  CHECK(s.val.files[0].path.find("img004") != std::string::npos);
  CHECK(s.val.files[1].path.find("img009") != std::string::npos);
  CHECK_THROWS_WITH(list_folder_splits((dir / "one").string(), 0.0), Catch::Contains("--val-fraction"));

  make_ramp_folder(dir / "two", "train", 2, 3, 4, 4, 1);
  make_ramp_folder(dir / "two", "val", 1, 2, 4, 4, 1);
  CHECK_THROWS_WITH(list_folder_splits((dir / "two").string(), 0.0), Catch::Contains("'c1'"));
  make_ramp_folder(dir / "two", "val", 2, 2, 4, 4, 1);
  const FolderSplitListing t = list_folder_splits((dir / "two").string(), 0.0);
  CHECK(t.train.files.size() == 6);
  CHECK(t.val.files.size() == 4);
}

TEST_CASE("Folder without a crop: one size, channels from the headers, exact pixels", "[folder]") {
  TempDir tmp;
  const fs::path dir = tmp.str();
  make_ramp_folder(dir, "train", 3, 4, 6, 5, 1);
  make_ramp_folder(dir, "val", 3, 1, 6, 5, 1);
  DatasetConfig c = folder_config(dir.string());
  c.normalize = false;
  const DatasetSplits s = load_dataset(c);
  CHECK(s.train->shape() == ImageShape{1, 5, 6});
  CHECK(s.train->size() == 12);
  CHECK(s.test->size() == 3);
  CHECK(s.train->classes() == 3);
  CHECK(s.train->label(5) == 1);
  const auto px = ramp_image(6, 5, 1, 101);  // c1/img001 is sample 5
  const auto v = augmented(*s.train, 5);
  for (std::size_t p = 0; p < px.size(); ++p) CHECK(v[p] == static_cast<float>(px[p] / 255.0));

  // One RGB image makes the collection RGB (ImageNet's normalisation); --channels 1 overrides.
  write_png(dir / "train" / "c0" / "rgb.png", ramp_image(6, 5, 3, 9), 6, 5, 3);
  CHECK(load_dataset(folder_config(dir.string())).train->shape().channels == 3);
  c.channels = 1;
  CHECK(load_dataset(c).train->shape().channels == 1);

  // Another size without a crop: named.
  write_png(dir / "val" / "c2" / "big.png", ramp_image(7, 5, 1, 1), 7, 5, 1);
  CHECK_THROWS_WITH(load_dataset(c), Catch::Contains("big.png") && Catch::Contains("7x5"));
}

TEST_CASE("Folder crops: evaluation centre crop, training crops from (key, index) alone", "[folder]") {
  TempDir tmp;
  const fs::path dir = tmp.str();
  make_ramp_folder(dir, "train", 2, 3, 40, 30, 3);
  write_jpeg(dir / "train" / "c1" / "photo.jpg", ramp_image(64, 48, 3, 5), 64, 48, 3);
  make_ramp_folder(dir, "val", 2, 1, 20, 36, 3);
  DatasetConfig c = folder_config(dir.string());
  c.crop.size = 16;
  const DatasetSplits s = load_dataset(c);
  REQUIRE(s.train->shape() == ImageShape{3, 16, 16});
  CHECK(s.norm_mean == std::vector<float>{0.485f, 0.456f, 0.406f});
  for (std::size_t i = 0; i < s.train->size(); ++i) {
    const auto a = augmented(*s.train, i, 77);
    CHECK(a == augmented(*s.train, i, 77));  // same key, same bits
    CHECK(a != augmented(*s.train, i, 78));
    CHECK(augmented(*s.train, i) == augmented(*s.train, i, 0));
  }
  // The JPEG's crops (decoded as a region at a DCT scale) equal resampling a full decode.
  const auto& folder = dynamic_cast<const FolderDataset&>(*s.train);
  std::size_t photo = 0;
  while (folder.listing().files[photo].path.find("photo.jpg") == std::string::npos) ++photo;
  const std::vector<float> mean(s.norm_mean.begin(), s.norm_mean.end()), stdev(s.norm_std.begin(), s.norm_std.end());
  for (std::uint64_t key : {1u, 2u, 3u, 4u, 5u, 6u}) {
    const CropBox box = random_resized_crop(64, 48, c.crop, FolderDataset::crop_key(key, photo));
    DecodeRequest request;
    request.min_width = static_cast<int>(std::ceil(64 * 16 / box.width));
    request.min_height = static_cast<int>(std::ceil(48 * 16 / box.height));
    const DecodedImage whole = decode_image(read_image_file(folder.listing().files[photo].path), "photo.jpg", request);
    const double sx = whole.width / 64.0, sy = whole.height / 48.0;
    std::vector<float> expected(3 * 16 * 16);
    resample_box(whole, {box.x * sx, box.y * sy, box.width * sx, box.height * sy, box.flip}, 16, 16, {mean, stdev},
                 expected.data());
    INFO("key " << key);
    CHECK(augmented(*s.train, photo, key) == expected);
  }
  // A flat image stays flat through any crop and resampling.
  write_png(dir / "val" / "c0" / "flat.png", std::vector<std::uint8_t>(50 * 30 * 3, 200), 50, 30, 3);
  const DatasetSplits f = load_dataset(c);
  const auto v = augmented(*f.test, 0);  // c0/flat.png sorts first
  for (int ch = 0; ch < 3; ++ch)
    CHECK(v[static_cast<std::size_t>(ch) * 256 + 17] == Approx((200 / 255.0 - f.norm_mean[ch]) / f.norm_std[ch]).epsilon(1e-5));

  c.augment = true;
  CHECK_THROWS_WITH(load_dataset(c), Catch::Contains("--augment") && Catch::Contains("--crop"));
  c.augment = false;
  c.crop.scale_min = 0.0;
  CHECK_THROWS_WITH(load_dataset(c), Catch::Contains("--crop-scale"));
}

TEST_CASE("Folder bad images: named errors, or skipped and listed", "[folder]") {
  TempDir tmp;
  const fs::path dir = tmp.str();
  make_ramp_folder(dir, "train", 2, 3, 8, 8, 1);
  make_ramp_folder(dir, "val", 2, 1, 8, 8, 1);
  const ImageBytes good = encode_png(ramp_image(8, 8, 1, 3), 8, 8, SPNG_COLOR_TYPE_GRAYSCALE, 8);
  // A truncated body: the header reads, the pixels do not (found mid-epoch).
  write_bytes((dir / "train" / "c0" / "img001.png").string(), ImageBytes(good.begin(), good.end() - 20));
  DatasetConfig c = folder_config(dir.string());
  c.normalize = false;
  {
    const DatasetSplits s = load_dataset(c);
    CHECK_THROWS_WITH(augmented(*s.train, 1), Catch::Contains("img001.png") && Catch::Contains("expected a complete PNG"));
  }
  c.skip_bad_images = true;
  {
    const DatasetSplits s = load_dataset(c);
    CHECK(augmented(*s.train, 1) == augmented(*s.train, 2));  // the next good image stands in
    const auto bad = dynamic_cast<const FolderDataset&>(*s.train).bad_images();
    REQUIRE(bad.size() == 1);
    CHECK(bad[0].find("img001.png") != std::string::npos);
  }
  // Headers that fail: found when the dataset is built.
  write_text(dir / "train" / "c1" / "text.jpg", "hello");
  write_bytes((dir / "train" / "c1" / "huge.png").string(), png_header_only(60000, 60000));
  write_bytes((dir / "train" / "c1" / "empty.png").string(), {});
  {
    const DatasetSplits s = load_dataset(c);
    CHECK(s.train->size() == 6);
    CHECK(dynamic_cast<const FolderDataset&>(*s.train).bad_images().size() == 3);
  }
  c.skip_bad_images = false;
  CHECK_THROWS_WITH(load_dataset(c), Catch::Contains("empty.png") && Catch::Contains("empty file"));
  fs::remove(dir / "train" / "c1" / "empty.png");
  CHECK_THROWS_WITH(load_dataset(c), Catch::Contains("huge.png") && Catch::Contains("--max-pixels"));
  fs::remove(dir / "train" / "c1" / "huge.png");
  CHECK_THROWS_WITH(load_dataset(c), Catch::Contains("text.jpg") && Catch::Contains("not a JPEG or PNG"));
}

TEST_CASE("A Fashion-MNIST slice as PNG files gives the IDX reader's floats", "[folder]") {
  DatasetConfig idx;
  idx.augment = true;
  const DatasetSplits fm = load_dataset(idx);
  const auto& train = dynamic_cast<const ImageDataset&>(*fm.train);
  const auto& test = dynamic_cast<const ImageDataset&>(*fm.test);
  TempDir tmp;
  ImageDataset ref_train = export_as_png(train, 300, tmp.str(), "train");
  ImageDataset ref_test = export_as_png(test, 60, tmp.str(), "val");
  const ChannelStats stats = ref_train.channel_stats();
  const std::vector<float> mean{static_cast<float>(stats.mean[0])}, std{static_cast<float>(stats.std[0])};
  ref_train.set_normalization(mean, std);
  ref_test.set_normalization(mean, std);
  ref_train.set_augment(true);

  DatasetConfig c = folder_config(tmp.str());
  c.augment = true;
  const DatasetSplits s = load_dataset(c);
  REQUIRE(s.train->shape() == train.shape());
  REQUIRE(s.train->size() == 300);
  CHECK(s.norm_mean == mean);
  CHECK(s.norm_std == std);
  for (std::size_t i = 0; i < s.train->size(); ++i) {
    REQUIRE(s.train->label(i) == ref_train.label(i));
    REQUIRE(augmented(*s.train, i) == augmented(ref_train, i));
    REQUIRE(augmented(*s.train, i, 99) == augmented(ref_train, i, 99));
  }
  for (std::size_t i = 0; i < s.test->size(); ++i) REQUIRE(augmented(*s.test, i) == augmented(ref_test, i));
}
