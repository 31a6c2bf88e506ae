// Packed shards: the writer and reader round trip, each bad input named (a flipped byte by
// shard and record, a truncated or missing shard by file, a damaged index), and
// pack_dataset from a folder: raw records give the folder's floats, JPEG records the size asked.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "datasets/DataNotFound.h"
#include "datasets/PackedDataset.h"
#include "datasets/Packer.h"
#include "datasets/ShardReader.h"
#include "datasets/ShardWriter.h"
#include "datasets/dataset_test_util.h"
#include "datasets/folder_test_util.h"

using namespace ringtrain;
using namespace ringtrain::test;
namespace fs = std::filesystem;

namespace {

ShardIndex head(int classes) {
  ShardIndex ix;
  ix.encoding = RecordEncoding::kRaw;
  ix.channels = 1;
  for (int k = 0; k < classes; ++k) ix.class_names.push_back(fmt::format("c{}", k));
  ix.norm_mean = {0.5f};
  ix.norm_std = {0.25f};
  return ix;
}

// 30 raw 4x3 gray records in shards of at most 100 bytes (3 records of 28 bytes each).
void write_small(const std::string& dir, const std::string& split) {
  ShardWriter w(dir, split, head(3), 100);
  for (int i = 0; i < 30; ++i) w.add(ramp_image(4, 3, 1, i), i % 3, 4, 3);
  w.finish();
}

void flip_byte(const std::string& path, std::uint64_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(at));
  f.put(static_cast<char>(c ^ 0x10));
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("Shards: records round trip across shards of a bounded size", "[packed]") {
  TempDir tmp;
  write_small(tmp.str(), "train");
  const ShardReader r(tmp.str(), "train");
  REQUIRE(r.size() == 30);
  CHECK(r.index().shard_bytes.size() == 10);
  for (std::uint64_t b : r.index().shard_bytes) CHECK(b <= 100);
  std::vector<std::uint8_t> buffer;
  for (std::size_t i = 0; i < r.size(); ++i) {
    const auto payload = r.read(i, buffer);
    CHECK(std::vector<std::uint8_t>(payload.begin(), payload.end()) == ramp_image(4, 3, 1, static_cast<int>(i)));
    CHECK(r.record(i).label == i % 3);
  }
  // Blocks never cross a shard; one record's worth of bytes each here.
  CHECK(r.block_starts(1).size() == 30);
  CHECK(r.block_starts(1 << 20).size() == 10);
  CHECK(r.index().norm_mean == std::vector<float>{0.5f});
}

TEST_CASE("Shards: a flipped byte names shard and record; truncated, missing shards and bad indexes name the file",
          "[packed]") {
  TempDir tmp;
  write_small(tmp.str(), "train");
  const std::string shard4 = shard_file_path(tmp.str(), "train", 4);
  {
    const ShardReader r(tmp.str(), "train");
    flip_byte(shard4, r.record(13).offset + kRecordHeaderBytes + 5);  // record 13 is shard 4's second
    std::vector<std::uint8_t> buffer;
    CHECK_NOTHROW(r.read(12, buffer));
    const std::string e = error_of([&] { r.read(13, buffer); });
    CHECK(e.find("train-00004.shard: record 13") != std::string::npos);
    CHECK(e.find("checksum mismatch") != std::string::npos);
  }
  fs::resize_file(shard4, fs::file_size(shard4) - 1);
  std::string e = error_of([&] { ShardReader(tmp.str(), "train"); });
  CHECK(e.find("train-00004.shard") != std::string::npos);
  CHECK(e.find("truncated") != std::string::npos);
  fs::remove(shard4);
  e = error_of([&] { ShardReader(tmp.str(), "train"); });
  CHECK(e.find("train-00004.shard: cannot open") != std::string::npos);
  CHECK_THROWS_AS(ShardReader(tmp.str(), "val"), DataNotFound);
  write_small(tmp.str(), "train");
  flip_byte(shard_index_path(tmp.str(), "train"), 40);
  e = error_of([&] { ShardReader(tmp.str(), "train"); });
  CHECK(e.find("train.index: index checksum mismatch") != std::string::npos);
}

TEST_CASE("pack: a folder packed raw gives the folder's floats; as JPEG, the size asked", "[packed]") {
  TempDir tmp;
  const fs::path src = fs::path(tmp.str()) / "src";
  make_ramp_folder(src, "train", 2, 5, 20, 12, 3);
  make_ramp_folder(src, "val", 2, 2, 20, 12, 3);
  DatasetConfig folder;
  folder.name = "folder";
  folder.data_dir = src.string();
  PackOptions raw;
  raw.out = tmp.file("raw");
  raw.raw = true;
  raw.shard_bytes = 2000;
  const PackResult r = pack_dataset(folder, raw);
  CHECK(r.train == 10);
  CHECK(r.val == 4);
  CHECK(r.shards > 2);
  const DatasetSplits want = load_dataset(folder);
  DatasetConfig packed = folder;
  packed.name = "packed";
  packed.data_dir = raw.out;
  const DatasetSplits got = load_dataset(packed);
  REQUIRE(got.train->size() == 10);
  CHECK(got.train->shape() == want.train->shape());
  CHECK(got.norm_mean == want.norm_mean);
  const std::size_t numel = want.train->shape().numel();
  std::vector<float> a(numel), b(numel);
  for (std::size_t i = 0; i < 10; ++i) {
    want.train->get_augmented(i, a.data(), 77);
    got.train->get_augmented(i, b.data(), 77);
    CHECK(a == b);
    CHECK(got.train->label(i) == want.train->label(i));
  }
  // The output exists now: refused, unless told.
  CHECK_THROWS_WITH(pack_dataset(folder, raw), Catch::Contains("--overwrite"));
  raw.overwrite = true;
  CHECK(pack_dataset(folder, raw).train == 10);

  PackOptions jpeg;
  jpeg.out = tmp.file("jpeg");
  jpeg.max_side = 10;
  pack_dataset(folder, jpeg);
  packed.data_dir = jpeg.out;
  packed.crop.size = 8;
  const DatasetSplits small = load_dataset(packed);
  const auto& reader = dynamic_cast<const PackedDataset&>(*small.train).reader();
  CHECK(reader.index().encoding == RecordEncoding::kJpeg);
  CHECK(reader.record(0).width == 10);
  CHECK(reader.record(0).height == 6);
  std::vector<float> crop(small.train->shape().numel());
  small.train->get_augmented(3, crop.data(), 5);
  CHECK(std::any_of(crop.begin(), crop.end(), [](float v) { return v != 0.0f; }));
}
