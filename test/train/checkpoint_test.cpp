// Checkpoint format: round trip, and every kind of damage is reported with the file and
// the section, never silently accepted.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "train/Checkpoint.h"

using namespace ringtrain;
using Catch::Matchers::Contains;

namespace {

CheckpointData sample() {
  CheckpointData d;
  d.meta = Json::object();
  d.meta.set("model", "lenet5");
  d.meta.set("global_step", 1234);
  for (int i = 0; i < 1000; ++i) d.params.push_back(static_cast<float>(i) * 0.25f - 3.0f);
  d.buffers = {1.0f, 2.0f};
  d.optimizer_state.assign(1000, 0.5f);
  return d;
}

std::filesystem::path temp_dir() {
  auto dir = std::filesystem::temp_directory_path() / "ringtrain_checkpoint_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("Checkpoint round-trips bit-exactly through a file") {
  const auto dir = temp_dir();
  const CheckpointData d = sample();
  const auto path = dir / Checkpoint::file_name(1234);
  const auto bytes = Checkpoint::serialize(d);
  CHECK(Checkpoint::write(path, bytes) == bytes.size());
  CHECK_FALSE(std::filesystem::exists(path.string() + ".tmp"));

  const CheckpointData back = Checkpoint::deserialize(Checkpoint::read_file(path), path.string());
  CHECK(back.meta.dump() == d.meta.dump());
  CHECK(back.params == d.params);
  CHECK(back.buffers == d.buffers);
  CHECK(back.optimizer_state == d.optimizer_state);
}

TEST_CASE("Checkpoint detects a flipped byte in every section") {
  const CheckpointData d = sample();
  const auto clean = Checkpoint::serialize(d);
  // Offsets inside: the preamble/table, the meta JSON, the params, the optimizer state.
  const std::size_t table_end = 16 + 4 * 40 + 4;
  const std::size_t meta_size = d.meta.dump(2).size();
  struct Case {
    std::size_t offset;
    const char* section;
  } cases[] = {
      {20, "header"},
      {table_end + 3, "meta"},
      {table_end + meta_size + 100, "params"},
      {clean.size() - 10, "optimizer"},
  };
  for (const auto& c : cases) {
    auto bad = clean;
    bad[c.offset] ^= std::byte{0x40};
    CHECK_THROWS_WITH(Checkpoint::deserialize(bad, "x.rtck"),
                      Contains("x.rtck") && Contains(c.section) && Contains("CRC32"));
  }
}

TEST_CASE("Checkpoint rejects truncation, bad magic and unknown versions") {
  const auto clean = Checkpoint::serialize(sample());
  auto truncated = clean;
  truncated.resize(clean.size() - 7);
  CHECK_THROWS_WITH(Checkpoint::deserialize(truncated, "t.rtck"),
                    Contains("t.rtck") && Contains("optimizer") && Contains("truncated"));

  auto short_file = clean;
  short_file.resize(30);
  CHECK_THROWS_WITH(Checkpoint::deserialize(short_file, "s.rtck"), Contains("truncated inside the section table"));

  auto magic = clean;
  magic[0] = std::byte{'X'};
  CHECK_THROWS_WITH(Checkpoint::deserialize(magic, "m.rtck"), Contains("not a ringtrain checkpoint"));

  auto version = clean;
  version[8] = std::byte{99};
  CHECK_THROWS_WITH(Checkpoint::deserialize(version, "v.rtck"), Contains("format version 99"));
}

TEST_CASE("Checkpoint reports a missing file with its path") {
  CHECK_THROWS_WITH(Checkpoint::read_file("/nonexistent/dir/ckpt.rtck"),
                    Contains("/nonexistent/dir/ckpt.rtck") && Contains("cannot open"));
}

TEST_CASE("Checkpoint finds the newest and prunes old ones") {
  const auto dir = temp_dir();
  const auto bytes = Checkpoint::serialize(sample());
  for (std::int64_t step : {5, 100, 20, 7}) Checkpoint::write(dir / Checkpoint::file_name(step), bytes);
  std::ofstream(dir / "notes.txt") << "not a checkpoint";
  CHECK(Checkpoint::latest_in(dir).filename() == "ckpt-000000100.rtck");
  Checkpoint::prune(dir, 2);
  CHECK(std::filesystem::exists(dir / Checkpoint::file_name(100)));
  CHECK(std::filesystem::exists(dir / Checkpoint::file_name(20)));
  CHECK_FALSE(std::filesystem::exists(dir / Checkpoint::file_name(7)));
  CHECK_FALSE(std::filesystem::exists(dir / Checkpoint::file_name(5)));
  CHECK(std::filesystem::exists(dir / "notes.txt"));
  CHECK(Checkpoint::latest_in(dir / "missing").empty());
}
