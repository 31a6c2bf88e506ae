// CIFAR-10 binary reader: record layout, both directory layouts, class names, and errors.
#include <catch2/catch.hpp>

#include "dataset_test_util.h"
#include "datasets/Cifar10Reader.h"
#include "datasets/Dataset.h"

using namespace ringtrain;
using namespace ringtrain::test;
using Catch::Matchers::Contains;

namespace {

// Record r of a batch: label (b + r) % 10, pixel k = (k * 7 + 3 * r + 11 * b) % 256.
Bytes batch_bytes(int b, int records, int bad_label_at = -1) {
  Bytes out;
  for (int r = 0; r < records; ++r) {
    out.push_back(static_cast<unsigned char>(r == bad_label_at ? 10 : (b + r) % 10));
    for (int k = 0; k < 3072; ++k) out.push_back(static_cast<unsigned char>((k * 7 + 3 * r + 11 * b) % 256));
  }
  return out;
}

void write_cifar(const std::string& dir, int per_batch = 2) {
  for (int b = 1; b <= 5; ++b) write_file(dir + "/data_batch_" + std::to_string(b) + ".bin", batch_bytes(b, per_batch));
  write_file(dir + "/test_batch.bin", batch_bytes(0, 3));
}

}  // namespace

TEST_CASE("CIFAR-10 batches load as CHW with their labels", "[cifar10]") {
  TempDir dir;
  const std::string batches = dir.file("cifar-10-batches-bin");
  write_cifar(batches);
  write_file(batches + "/batches.meta.txt", [] {
    std::string s;
    for (int k = 0; k < 10; ++k) s += "name" + std::to_string(k) + "\n";
    s += "\n";
    return Bytes(s.begin(), s.end());
  }());
  DatasetConfig config;
  config.name = "cifar10";
  config.data_dir = dir.str();
  config.normalize = false;
  auto splits = load_dataset(config);
  REQUIRE(splits.train->size() == 10);
  REQUIRE(splits.test->size() == 3);
  REQUIRE(splits.train->shape() == ImageShape{3, 32, 32});
  CHECK(splits.train->class_names()[7] == "name7");
  // Train sample 7 is record 1 of data_batch_4.
  CHECK(splits.train->label(7) == (4 + 1) % 10);
  std::vector<float> x(3072);
  splits.train->get(7, x.data());
  for (int k : {0, 1, 1023, 1024, 2048 + 5 * 32 + 9, 3071})
    CHECK(x[k] == Approx(((k * 7 + 3 * 1 + 11 * 4) % 256) / 255.0));
  CHECK(splits.test->label(2) == 2);
}

TEST_CASE("CIFAR-10 loads from a directory holding the batches directly, official names by default", "[cifar10]") {
  TempDir dir;
  write_cifar(dir.str(), 1);
  DatasetConfig config;
  config.name = "cifar10";
  config.data_dir = dir.str();
  auto splits = load_dataset(config);
  CHECK(splits.train->size() == 5);
  CHECK(splits.train->class_names()[0] == "airplane");
  CHECK(splits.train->class_names()[9] == "truck");
}

TEST_CASE("CIFAR-10 errors name the file and the problem", "[cifar10]") {
  TempDir dir;
  write_cifar(dir.str());
  DatasetConfig config;
  config.name = "cifar10";
  config.data_dir = dir.str();
  const std::string batch3 = dir.file("data_batch_3.bin");

  SECTION("record size off") {
    Bytes b = batch_bytes(3, 2);
    b.resize(b.size() + 5);
    write_file(batch3, b);
    REQUIRE_THROWS_WITH(load_dataset(config), Contains(batch3) && Contains("3073-byte"));
  }
  SECTION("truncated file") {
    Bytes b = batch_bytes(3, 2);
    b.resize(b.size() - 100);
    write_file(batch3, b);
    REQUIRE_THROWS_WITH(load_dataset(config), Contains(batch3) && Contains("not a whole number"));
  }
  SECTION("label out of range") {
    write_file(batch3, batch_bytes(3, 2, 1));
    REQUIRE_THROWS_WITH(load_dataset(config), Contains(batch3) && Contains("label 10 in record 1 out of range"));
  }
  SECTION("missing batch") {
    std::filesystem::remove(batch3);
    REQUIRE_THROWS_WITH(load_dataset(config), Contains(batch3) && Contains("not found") && Contains("test_batch.bin") &&
                                                  Contains("scripts/get-data.sh cifar10 DIR downloads it"));
  }
  SECTION("class-name file with the wrong count") {
    write_file(dir.file("batches.meta.txt"), Bytes{'a', '\n', 'b', '\n', 'c', '\n'});
    REQUIRE_THROWS_WITH(load_dataset(config), Contains(dir.file("batches.meta.txt")) && Contains("3 class names, expected 10"));
  }
  SECTION("no directory") {
    config.data_dir = dir.file("nowhere");
    REQUIRE_THROWS_WITH(load_dataset(config), Contains(dir.file("nowhere")) && Contains("data_batch_1.bin"));
  }
  SECTION("no data dir at all") {
    config.data_dir.clear();
    REQUIRE_THROWS_WITH(load_dataset(config), Contains("--data-dir"));
  }
}

TEST_CASE("CIFAR-10 files longer than the 1024-record read buffer", "[cifar10]") {
  // The reader reads at most 1024 records at a time: records past the first buffer, in a
  // second file, and an error past the buffer must all land at the right index.
  TempDir dir;
  const std::string long_batch = dir.file("long.bin"), short_batch = dir.file("short.bin");
  write_file(long_batch, batch_bytes(2, 1030));
  write_file(short_batch, batch_bytes(6, 3));
  const auto d = read_cifar10_batches({long_batch, short_batch}, {});
  REQUIRE(d->size() == 1033);
  std::vector<float> x(3072);
  for (int i : {0, 1023, 1024, 1029, 1030, 1032}) {
    const int b = i < 1030 ? 2 : 6, r = i < 1030 ? i : i - 1030;
    CHECK(d->label(static_cast<std::size_t>(i)) == (b + r) % 10);
    d->get(static_cast<std::size_t>(i), x.data());
    for (int k : {0, 1500, 3071}) CHECK(x[k] == Approx(((k * 7 + 3 * r + 11 * b) % 256) / 255.0));
  }
  write_file(long_batch, batch_bytes(2, 1030, 1027));
  REQUIRE_THROWS_WITH(read_cifar10_batches({short_batch, long_batch}, {}),
                      Contains(long_batch) && Contains("label 10 in record 1027 out of range"));
}
