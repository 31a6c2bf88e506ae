// Checkpoint format: round trip, and every kind of damage is reported with the file and
// the section, never silently accepted.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>

#include "checkpoint/Checkpoint.h"
#include "checkpoint/Crc32.h"
#include "checkpoint_test_util.h"

using namespace ringtrain;
using namespace ringtrain::test;
using Catch::Matchers::Contains;

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

TEST_CASE("Checkpoint::write from where the sections live gives serialize()'s file, byte for byte") {
  const auto dir = temp_dir();
  CheckpointData d = sample();
  // Values whose bytes would show a section swapped, shifted or narrowed: NaN payloads,
  // negative zero, subnormals.
  d.params[1] = -0.0f;
  d.params[2] = std::numeric_limits<float>::denorm_min();
  d.optimizer_state[3] = std::numeric_limits<float>::quiet_NaN();
  const auto path = dir / Checkpoint::file_name(1234);
  const auto bytes = Checkpoint::serialize(d);
  const CheckpointView view{d.meta, d.params, d.buffers, d.optimizer_state};
  CHECK(Checkpoint::write(path, view) == bytes.size());
  CHECK(Checkpoint::read_file(path) == bytes);
  CHECK_FALSE(std::filesystem::exists(path.string() + ".tmp"));

  SECTION("empty sections too") {
    d.buffers.clear();
    const CheckpointView no_buffers{d.meta, d.params, d.buffers, d.optimizer_state};
    CHECK(Checkpoint::write(path, no_buffers) == Checkpoint::serialize(d).size());
    CHECK(Checkpoint::read_file(path) == Checkpoint::serialize(d));
  }
  SECTION("a failed write names the file, leaves no .tmp and the previous file whole") {
    std::filesystem::create_symlink("/dev/full", path.string() + ".tmp");
    CHECK_THROWS_WITH(Checkpoint::write(path, view), Contains(path.string() + ".tmp") && Contains("No space left"));
    CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(path.string() + ".tmp")));
    CHECK(Checkpoint::read_file(path) == bytes);
  }
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

TEST_CASE("Checkpoint metadata is validated key by key: one line naming file, key and expectation") {
  struct Case {
    const char* what;
    std::function<void(Json&)> damage;
    const char* key;
    const char* expected;
  };
  const Case cases[] = {
      {"missing key", [](Json& m) { m = Json(Json::Object{}); }, "format_version", "the key is missing"},
      {"missing epoch",
       [](Json& m) {
         Json copy = Json::object();
         for (const auto& [k, v] : m.as_object())
           if (k != "epoch") copy.set(k, v);
         m = copy;
       },
       "'epoch'", "the key is missing"},
      {"wrong type", [](Json& m) { m.set("epoch", "3"); }, "'epoch'", "an integer in [0, 2147483646]"},
      {"negative epoch", [](Json& m) { m.set("epoch", -1); }, "'epoch'", "got -1"},
      {"epoch >= 2^31", [](Json& m) { m.set("epoch", 2147483648LL); }, "'epoch'", "got 2147483648"},
      {"negative step_in_epoch", [](Json& m) { m.set("step_in_epoch", -1000); }, "'step_in_epoch'", "got -1000"},
      {"step_in_epoch past global_step", [](Json& m) { m.set("step_in_epoch", 5000); }, "'step_in_epoch'",
       "[0, 1234]"},
      {"fractional step", [](Json& m) { m.set("global_step", 12.5); }, "'global_step'", "got 12.5"},
      {"huge double step", [](Json& m) { m.set("global_step", 1e300); }, "'global_step'", "an integer"},
      {"unknown model", [](Json& m) { m.set("model", "resnet999"); }, "'model'", "one of"},
      {"unknown optimizer", [](Json& m) { m.set("optimizer", "rmsprop"); }, "'optimizer'", "sgd"},
      {"num_params disagrees", [](Json& m) { m.set("num_params", 999); }, "'num_params'", "[1000, 1000]"},
      {"NaN-like seconds", [](Json& m) { m.set("elapsed_s", Json()); }, "'elapsed_s'", "a finite number"},
      {"negative loss sum", [](Json& m) { m.set("epoch_loss_sum", -1.0); }, "'epoch_loss_sum'", ">= 0"},
      {"world size 0", [](Json& m) { m.set("world_size", 0); }, "'world_size'", "got 0"},
      {"bad input shape", [](Json& m) { m.set("input_shape", "1x28"); }, "'input_shape'", "CxHxW"},
      {"config not an object", [](Json& m) { m.set("config", 5); }, "'config'", "an object"},
      {"unknown dataset",
       [](Json& m) {
         Json c = m.at("config");
         c.set("dataset", "imagenet");
         m.set("config", c);
       },
       "'config.dataset'", "one of fashion-mnist"},
      {"synthetic_train 10^12",
       [](Json& m) {
         Json c = m.at("config");
         c.set("synthetic_train", 1000000000000LL);
         m.set("config", c);
       },
       "'config.synthetic_train'", "fits in this machine's"},
      {"meta not an object", [](Json& m) { m = Json::array(); }, "meta", "expected a JSON object"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    CheckpointData d = sample();
    c.damage(d.meta);
    const auto bytes = Checkpoint::serialize(d);
    try {
      (void)Checkpoint::deserialize(bytes, "dir/m.rtck");
      FAIL("accepted: " << c.what);
    } catch (const std::runtime_error& e) {
      const std::string msg = e.what();
      CHECK_THAT(msg, Contains("dir/m.rtck: meta") && Contains(c.key) && Contains(c.expected));
      CHECK(msg.find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("Checkpoint rejects trailing bytes and sections that are not back to back") {
  const auto clean = Checkpoint::serialize(sample());
  auto longer = clean;
  longer.push_back(std::byte{0});
  longer.push_back(std::byte{0});
  CHECK_THROWS_WITH(Checkpoint::deserialize(longer, "t.rtck"),
                    Contains("t.rtck") && Contains("2 unexpected bytes after the last section"));
}

TEST_CASE("Checkpoint::read_file names a directory given as a checkpoint") {
  const auto dir = temp_dir();
  CHECK_THROWS_WITH(Checkpoint::read_file(dir), Contains(dir.string()) && Contains("is a directory"));
}

TEST_CASE("Checkpoint::write on a full filesystem: error naming the file, no .tmp left, target untouched") {
  // /dev/full accepts open() and fails every write with ENOSPC; a symlink named <path>.tmp
  // is not what write() opens (it truncates-creates <path>.tmp itself), so use a directory
  // whose .tmp is /dev/full through a symlink.
  const auto dir = temp_dir();
  const auto path = dir / "ckpt-000000001.rtck";
  std::ofstream(path) << "previous";
  std::filesystem::create_symlink("/dev/full", path.string() + ".tmp");
  const auto bytes = Checkpoint::serialize(sample());
  CHECK_THROWS_WITH(Checkpoint::write(path, bytes), Contains(path.string() + ".tmp") && Contains("No space left"));
  CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(path.string() + ".tmp")));
  std::ifstream in(path);
  std::string kept;
  in >> kept;
  CHECK(kept == "previous");
}

TEST_CASE("a metadata section padded with spaces (RAM snapshots) reads as the same metadata") {
  const CheckpointData d = sample();
  std::string meta = d.meta.dump(2);
  const std::size_t text = meta.size();
  meta.append(4096 + 3, ' ');
  const CheckpointLayout l = Checkpoint::layout(meta.size(), 4 * d.params.size(), 4 * d.buffers.size(),
                                                4 * d.optimizer_state.size());
  std::vector<std::byte> image(l.total);
  std::memcpy(image.data() + l.offset[0], meta.data(), meta.size());
  std::memcpy(image.data() + l.offset[1], d.params.data(), l.size[1]);
  std::memcpy(image.data() + l.offset[2], d.buffers.data(), l.size[2]);
  std::memcpy(image.data() + l.offset[3], d.optimizer_state.data(), l.size[3]);
  Checkpoint::seal(image, l);
  const CheckpointData back = Checkpoint::deserialize(image, "padded.rtck");
  CHECK(back.meta.dump(2) == d.meta.dump(2));
  CHECK(back.params == d.params);
  CHECK(back.optimizer_state == d.optimizer_state);
  // Anything but whitespace after the text is still refused.
  image[l.offset[0] + text + 10] = std::byte{'x'};
  Checkpoint::seal(image, l);
  CHECK_THROWS_WITH(Checkpoint::deserialize(image, "padded.rtck"), Contains("padded.rtck: meta"));
}

TEST_CASE("Checkpoint::seal returns the CRC32s it writes to the section table") {
  CheckpointData d = sample();
  std::vector<std::byte> bytes = Checkpoint::serialize(d);
  const std::string text = d.meta.dump(2);
  const CheckpointLayout l = Checkpoint::layout(text.size(), 4 * d.params.size(), 4 * d.buffers.size(),
                                                4 * d.optimizer_state.size());
  REQUIRE(l.total == bytes.size());
  const Checkpoint::SectionCrcs crcs = Checkpoint::seal(bytes, l, {});
  for (std::size_t i = 0; i < CheckpointLayout::kSections; ++i) {
    INFO("section " << i);
    CHECK(crcs[i] == checkpoint_crc32(std::span<const std::byte>(bytes).subspan(l.offset[i], l.size[i])));
  }
  // A section's CRC given as known is returned as given (and written: the file then fails to verify).
  Checkpoint::KnownCrcs known{};
  known[1] = crcs[1] ^ 1u;
  CHECK(Checkpoint::seal(bytes, l, known)[1] == (crcs[1] ^ 1u));
  CHECK_THROWS_WITH(Checkpoint::verify(bytes, "x.rtck"), Contains("params"));
}
