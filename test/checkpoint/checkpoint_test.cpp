// Checkpoint format: round trip, and every kind of damage is reported with the file and
// the section, never silently accepted.
#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <limits>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>

#include <zlib.h>

#include "checkpoint/Checkpoint.h"
#include "checkpoint/Crc32.h"
#include "checkpoint/SnapshotDigest.h"
#include "checkpoint/SnapshotSlots.h"
#include "checkpoint/SnapshotStore.h"
#include "checkpoint/SnapshotWriter.h"
#include "checkpoint/StreamCopy.h"
#include "collectives/SelfCommunicator.h"

using namespace ringtrain;
using Catch::Matchers::Contains;

namespace {

// Metadata with every key the trainer writes, valid for 1000 parameters.
Json valid_meta() {
  Json config = Json::object();
  config.set("model", "lenet5");
  config.set("dataset", "synthetic");
  config.set("data_dir", "");
  config.set("normalize", true);
  config.set("mean", Json::array());
  config.set("std", Json::array());
  config.set("synthetic_shape", "1x28x28");
  config.set("synthetic_classes", 10);
  config.set("synthetic_train", 512);
  config.set("synthetic_test", 200);
  config.set("synthetic_seed", 0);
  Json m = Json::object();
  m.set("format_version", Checkpoint::kFormatVersion);
  m.set("model", "lenet5");
  m.set("signature", "conv(1->6,5x5) ...");
  m.set("input_shape", "1x28x28");
  m.set("classes", 10);
  m.set("num_params", 1000);
  m.set("world_size", 2);
  m.set("batch_size", 16);
  m.set("global_step", 1234);
  m.set("epoch", 3);
  m.set("step_in_epoch", 7);
  m.set("elapsed_s", 12.5);
  m.set("epoch_loss_sum", 3.25);
  m.set("epoch_correct", 70.0);
  m.set("epoch_count", 112.0);
  m.set("epoch_seconds", 0.75);
  m.set("seed", 42);
  m.set("optimizer", "sgd");
  m.set("optimizer_steps", 1234);
  m.set("lr", 0.01);
  m.set("test_accuracy", 0.5);
  m.set("config", std::move(config));
  return m;
}

CheckpointData sample() {
  CheckpointData d;
  d.meta = valid_meta();
  for (int i = 0; i < 1000; ++i) d.params.push_back(static_cast<float>(i) * 0.25f - 3.0f);
  d.buffers = {1.0f, 2.0f};
  d.optimizer_state.assign(1000, 0.5f);
  return d;
}

std::filesystem::path temp_dir() {
  // Per process: two suites running at once (ctest -j, two checkouts) must not share it; the
  // last test's files go when the process ends.
  static const struct Dir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("ringtrain_checkpoint_test-" + std::to_string(::getpid()));
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } owned;
  const std::filesystem::path& dir = owned.path;
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

TEST_CASE("SnapshotSlots: written in place, the newest two kept, pruned files reused, a failed write keeps them") {
  const auto dir = temp_dir() / "node";
  CheckpointData d = sample();
  SnapshotSlots slots(dir, 2);
  auto inode = [](const std::filesystem::path& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return st.st_ino;
  };
  // One snapshot of step `step`, built in place as SnapshotWriter does.
  auto put = [&](std::int64_t step) {
    d.meta.set("global_step", step);
    const std::vector<std::byte> want = Checkpoint::serialize(d);
    const std::string meta = d.meta.dump(2);
    const CheckpointLayout l = Checkpoint::layout(meta.size(), 4 * d.params.size(), 4 * d.buffers.size(),
                                                  4 * d.optimizer_state.size());
    const std::span<std::byte> image = slots.open(l.total);
    std::memcpy(image.data() + l.offset[0], meta.data(), meta.size());
    std::memcpy(image.data() + l.offset[1], d.params.data(), l.size[1]);
    std::memcpy(image.data() + l.offset[2], d.buffers.data(), l.size[2]);
    std::memcpy(image.data() + l.offset[3], d.optimizer_state.data(), l.size[3]);
    Checkpoint::seal(image, l);
    CHECK(std::vector<std::byte>(image.begin(), image.end()) == want);  // the same bytes as serialize()
    slots.commit(step);
  };
  auto steps = [&] {
    std::vector<std::int64_t> found;
    for (const SnapshotFile& f : snapshots_in_dir(dir)) found.push_back(f.step);
    return found;
  };
  slots.prepare_all(1 << 16);
  put(10);
  put(20);
  const auto inode_of_10 = inode(dir / snapshot_file_name(10));
  put(30);
  CHECK(steps() == std::vector<std::int64_t>{20, 30});
  put(40);  // into step 10's file, the spare after step 30
  CHECK(steps() == std::vector<std::int64_t>{30, 40});
  CHECK(inode(dir / snapshot_file_name(40)) == inode_of_10);
  for (std::int64_t step : {30, 40}) {
    const auto path = dir / snapshot_file_name(step);
    CHECK(Checkpoint::deserialize(Checkpoint::read_file(path), path.string()).meta.at("global_step").as_int() == step);
  }
  // A write that fails after the open (seal or rename): the slot stays a spare, 30 and 40 stay.
  (void)slots.open(1000);
  slots.abandon();
  CHECK(steps() == std::vector<std::int64_t>{30, 40});
  put(50);
  CHECK(steps() == std::vector<std::int64_t>{40, 50});
  CHECK_THROWS_WITH(Checkpoint::verify(std::vector<std::byte>(100), "x.rtck"), Contains("x.rtck: header"));
}

TEST_CASE("checkpoint_crc32 (libdeflate) gives zlib's crc32 bit for bit: odd lengths, offsets, continued") {
  std::mt19937_64 rng(23);
  std::vector<std::byte> buffer((1 << 20) + 977);
  for (std::byte& b : buffer) b = static_cast<std::byte>(rng());
  const auto zlib_crc = [](std::span<const std::byte> bytes, uLong crc = 0) {
    return static_cast<std::uint32_t>(crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
  };
  CHECK(checkpoint_crc32({}) == 0u);
  const char* check = "123456789";
  CHECK(checkpoint_crc32(std::as_bytes(std::span(check, 9))) == 0xCBF43926u);
  for (int i = 0; i < 200; ++i) {
    // Lengths from 1 byte to past a megabyte, odd or not, at unaligned offsets.
    const std::size_t length = i < 100 ? static_cast<std::size_t>(i) * 2 + 1 : rng() % (buffer.size() - 64);
    const std::size_t offset = rng() % (buffer.size() - length + 1);
    const auto bytes = std::span<const std::byte>(buffer).subspan(offset, length);
    INFO("length " << length << " offset " << offset);
    CHECK(checkpoint_crc32(bytes) == zlib_crc(bytes));
    // Continued from a first piece, as zlib's crc32(crc, ...) is.
    const std::size_t cut = length / 3;
    CHECK(checkpoint_crc32(bytes.subspan(cut), checkpoint_crc32(bytes.first(cut))) == zlib_crc(bytes));
  }
}

TEST_CASE("checkpoint_crc32's 512-bit fold gives zlib's crc32 bit for bit: every length around its blocks, offsets, continued") {
  if (!checkpoint_crc32_fold_available()) {
    WARN("this CPU has no AVX-512 with VPCLMULQDQ: checkpoint_crc32 is libdeflate's alone, the fold is not tested");
    return;
  }
  std::mt19937_64 rng(29);
  std::vector<std::byte> buffer((3 << 20) + 333);
  for (std::byte& b : buffer) b = static_cast<std::byte>(rng());
  const auto zlib_crc = [](std::span<const std::byte> bytes, uLong crc = 0) {
    return static_cast<std::uint32_t>(crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
  };
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 2100; ++n) lengths.push_back(n);  // below, at and past 1 to 8 blocks of 256
  for (int i = 0; i < 40; ++i) lengths.push_back(rng() % (buffer.size() - 64));
  lengths.push_back(buffer.size() - 64);
  int wrong = 0;
  for (const std::size_t length : lengths) {
    const std::size_t offset = rng() % 64;
    const auto bytes = std::span<const std::byte>(buffer).subspan(offset, length);
    const auto start = static_cast<std::uint32_t>(rng());
    // All-ones data too: a register xored into the first bytes must not cancel out.
    if (checkpoint_crc32_fold(bytes, start) != zlib_crc(bytes, start)) ++wrong;
    if (checkpoint_crc32(bytes) != zlib_crc(bytes)) ++wrong;
  }
  CHECK(wrong == 0);
  const std::vector<std::byte> ones(4096 + 7, std::byte{0xff});
  CHECK(checkpoint_crc32_fold(ones) == zlib_crc(ones));
  CHECK(checkpoint_crc32_fold(ones, 0xffffffffu) == zlib_crc(ones, 0xffffffffu));
  const auto all = std::span<const std::byte>(buffer);
  CHECK(checkpoint_crc32_fold(all.subspan(1000), checkpoint_crc32_fold(all.first(1000))) == zlib_crc(all));
}

TEST_CASE("stream_copy and stream_zero write exactly their range at any alignment and length") {
  std::mt19937_64 rng(31);
  std::vector<std::byte> src(4096);
  for (std::byte& b : src) b = static_cast<std::byte>(rng() | 1);  // no zero bytes
  for (std::size_t at = 0; at < 40; ++at) {
    for (const std::size_t length : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17},
                                     std::size_t{63}, std::size_t{64}, std::size_t{65}, std::size_t{1000}, std::size_t{3001}}) {
      INFO("at " << at << " length " << length);
      std::vector<std::byte> dst(3100, std::byte{0x5a});
      stream_copy(dst.data() + at, src.data() + 7, length);
      stream_fence();
      CHECK(std::memcmp(dst.data() + at, src.data() + 7, length) == 0);
      CHECK(std::count(dst.begin(), dst.begin() + static_cast<std::ptrdiff_t>(at), std::byte{0x5a}) == static_cast<std::ptrdiff_t>(at));
      CHECK(std::count(dst.begin() + static_cast<std::ptrdiff_t>(at + length), dst.end(), std::byte{0x5a}) ==
            static_cast<std::ptrdiff_t>(dst.size() - at - length));
      stream_zero(dst.data() + at, length);
      stream_fence();
      CHECK(std::count(dst.begin(), dst.end(), std::byte{0}) == static_cast<std::ptrdiff_t>(length));
      CHECK(std::count(dst.begin() + static_cast<std::ptrdiff_t>(at), dst.begin() + static_cast<std::ptrdiff_t>(at + length),
                       std::byte{0}) == static_cast<std::ptrdiff_t>(length));
    }
  }
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

TEST_CASE("SnapshotWriter: a snapshot holds its step's state although the next update ran before its thread copied it") {
  // The snapshot thread copies the parameters and optimizer state after take() returns
  // (SnapshotWriter.h); here it sleeps 100 ms first (the test hook), while this thread, as
  // the training loop does, changes the buffers at once (the next forward) and the parameters
  // and optimizer state after fence() (the next optimizer update). Without the fence, or
  // with the buffers copied late, the snapshot would hold the changed values.
  const auto root = temp_dir() / "ram";
  CheckpointData d = sample();
  d.meta.set("global_step", 10);
  SelfCommunicator comm;
  std::atomic<int> warnings{0};  // from the snapshot thread too: counted, checked below
  ::setenv("RINGTRAIN_TEST_SNAPSHOT_SLOW_COPY_MS", "100", 1);
  SnapshotWriter writer(comm, root, 2, 4 * (d.params.size() + d.buffers.size() + d.optimizer_state.size()),
                        d.meta.dump(2).size(), [&](const std::string&) { ++warnings; });
  ::unsetenv("RINGTRAIN_TEST_SNAPSHOT_SLOW_COPY_MS");
  std::vector<float> params = d.params, buffers = d.buffers, state = d.optimizer_state;
  REQUIRE(writer.take(10, params, buffers, state, d.meta) == SnapshotWriter::Taken::kYes);
  for (float& b : buffers) b = -1.0f;  // the next forward
  writer.fence();                       // then its optimizer update
  for (float& p : params) p += 1.0f;
  for (float& v : state) v = 7.0f;
  writer.finish();
  const auto path = writer.own_dir() / snapshot_file_name(10);
  const CheckpointData back = Checkpoint::deserialize(Checkpoint::read_file(path), path.string());
  auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
  };
  CHECK(same_bits(back.params, d.params));
  CHECK(same_bits(back.buffers, d.buffers));
  CHECK(same_bits(back.optimizer_state, d.optimizer_state));
  CHECK(back.meta.at("global_step").as_int() == 10);
  const SnapshotWriter::Stats stats = writer.stats();
  CHECK(stats.written == 1);
  CHECK(stats.fence_waits <= 1);
  CHECK(warnings == 0);
}

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
}

}  // namespace

TEST_CASE("SnapshotWriter: the state captured block by block in the optimizer update is the update's, CRCs whole") {
  // arm() before the update, capture() after each of its blocks (as Optimizer's update
  // observer calls it), take() at the step boundary. The blocks leave out floats (padding:
  // [100, 112) and the tail [960, 1000)), which hold values no zeroed file has, and the
  // state is two planes (Adam's m and v), whose CRCs are combined. This thread then changes
  // everything at once, without fence() (the next update): the snapshot must still hold the
  // update's bits, and read back (every CRC checked), with the CRCs computed from cache or,
  // under the test hook, by the snapshot thread.
  const bool crc_on_thread = GENERATE(false, true);
  const auto root = temp_dir() / "ram";
  CheckpointData d = sample();
  d.meta.set("global_step", 10);
  SelfCommunicator comm;
  std::atomic<int> warnings{0};
  if (crc_on_thread) ::setenv("RINGTRAIN_TEST_SNAPSHOT_CRC_ON_THREAD", "1", 1);
  SnapshotWriter writer(comm, root, 2, 4 * (d.params.size() + d.buffers.size() + 2 * d.params.size()),
                        d.meta.dump(2).size(), [&](const std::string&) { ++warnings; });
  ::unsetenv("RINGTRAIN_TEST_SNAPSHOT_CRC_ON_THREAD");
  std::vector<float> params = d.params, buffers = d.buffers, state(2 * params.size(), 0.5f);
  REQUIRE(writer.arm(params, state, 4 * buffers.size()));
  CHECK(writer.armed());
  auto update = [&](std::size_t offset, std::size_t count) {
    for (std::size_t i = offset; i < offset + count; ++i) {
      params[i] += 1.0f;
      state[i] = 2.0f + static_cast<float>(i);
      state[params.size() + i] = 3.0f * static_cast<float>(i);
    }
    writer.capture(offset, count);
  };
  update(0, 100);
  update(112, 288);
  update(400, 560);
  const std::vector<float> want_params = params, want_state = state;
  REQUIRE(writer.take(10, params, buffers, state, d.meta) == SnapshotWriter::Taken::kYes);
  CHECK_FALSE(writer.armed());
  for (float& p : params) p = -5.0f;  // the next update, at once
  for (float& v : state) v = -6.0f;
  writer.finish();
  const auto path = writer.own_dir() / snapshot_file_name(10);
  const CheckpointData back = Checkpoint::deserialize(Checkpoint::read_file(path), path.string());
  CHECK(same_bits(back.params, want_params));
  CHECK(same_bits(back.optimizer_state, want_state));
  CHECK(same_bits(back.buffers, d.buffers));
  const SnapshotWriter::Stats stats = writer.stats();
  CHECK(stats.written == 1);
  CHECK(stats.captured == 1);
  CHECK(stats.fence_waits == 0);
  CHECK(warnings == 0);
}

TEST_CASE("SnapshotWriter: an armed update that reports no block is captured whole at take(); blocks out of order throw") {
  const auto root = temp_dir() / "ram";
  CheckpointData d = sample();
  SelfCommunicator comm;
  SnapshotWriter writer(comm, root, 2, 4 * (d.params.size() + d.buffers.size() + d.optimizer_state.size()),
                        d.meta.dump(2).size(), [](const std::string&) {});
  std::vector<float> params = d.params, state = d.optimizer_state;
  REQUIRE(writer.arm(params, state, 4 * d.buffers.size()));
  writer.capture(500, 10);
  CHECK_THROWS_AS(writer.capture(400, 10), std::logic_error);   // before the last block
  CHECK_THROWS_AS(writer.capture(990, 20), std::logic_error);   // past the end
  writer.disarm();
  CHECK_FALSE(writer.armed());
  // Armed, and the update ran without reporting (an optimizer without an observer).
  REQUIRE(writer.arm(params, state, 4 * d.buffers.size()));
  for (float& p : params) p *= 2.0f;
  for (float& v : state) v += 1.0f;
  const std::vector<float> want_params = params, want_state = state;
  REQUIRE(writer.take(1234, params, d.buffers, state, d.meta) == SnapshotWriter::Taken::kYes);
  for (float& p : params) p = 0.0f;
  writer.finish();
  const auto path = writer.own_dir() / snapshot_file_name(1234);
  const CheckpointData back = Checkpoint::deserialize(Checkpoint::read_file(path), path.string());
  CHECK(same_bits(back.params, want_params));
  CHECK(same_bits(back.optimizer_state, want_state));
  CHECK(writer.stats().captured == 1);
}

TEST_CASE("SnapshotWriter: under RINGTRAIN_TEST_SNAPSHOT_COPY_ON_THREAD the update captures nothing; the thread copies") {
  const auto root = temp_dir() / "ram";
  CheckpointData d = sample();
  SelfCommunicator comm;
  ::setenv("RINGTRAIN_TEST_SNAPSHOT_COPY_ON_THREAD", "1", 1);
  SnapshotWriter writer(comm, root, 2, 4 * (d.params.size() + d.buffers.size() + d.optimizer_state.size()),
                        d.meta.dump(2).size(), [](const std::string&) {});
  ::unsetenv("RINGTRAIN_TEST_SNAPSHOT_COPY_ON_THREAD");
  std::vector<float> params = d.params, state = d.optimizer_state;
  CHECK_FALSE(writer.arm(params, state, 4 * d.buffers.size()));
  REQUIRE(writer.take(1234, params, d.buffers, state, d.meta) == SnapshotWriter::Taken::kYes);
  writer.fence();
  for (float& p : params) p = 0.0f;
  writer.finish();
  const auto path = writer.own_dir() / snapshot_file_name(1234);
  const CheckpointData back = Checkpoint::deserialize(Checkpoint::read_file(path), path.string());
  CHECK(same_bits(back.params, d.params));
  CHECK(writer.stats().captured == 0);
}

TEST_CASE("SnapshotWriter::copy_on_thread: the caller's choice of where the state is copied; the hook forces the thread") {
  const auto root = temp_dir() / "ram";
  CheckpointData d = sample();
  SelfCommunicator comm;
  const std::size_t bytes = 4 * (d.params.size() + d.buffers.size() + d.optimizer_state.size());
  std::vector<float> params = d.params, state = d.optimizer_state;
  {
    SnapshotWriter writer(comm, root, 2, bytes, d.meta.dump(2).size(), [](const std::string&) {});
    CHECK_FALSE(writer.copies_on_thread());  // the default: the update captures
    writer.copy_on_thread(true);
    CHECK(writer.copies_on_thread());
    CHECK(writer.stats_json().at("copy").as_string() == "thread");
    CHECK_FALSE(writer.arm(params, state, 4 * d.buffers.size()));
    REQUIRE(writer.take(1234, params, d.buffers, state, d.meta) == SnapshotWriter::Taken::kYes);
    writer.fence();
    for (float& p : params) p = 0.0f;  // after fence(): the thread's copy holds the values before
    writer.finish();
    const auto path = writer.own_dir() / snapshot_file_name(1234);
    const CheckpointData back = Checkpoint::deserialize(Checkpoint::read_file(path), path.string());
    CHECK(same_bits(back.params, d.params));
    CHECK(same_bits(back.optimizer_state, d.optimizer_state));
    CHECK(writer.stats().captured == 0);
    writer.copy_on_thread(false);  // back to the capture
    CHECK(writer.stats_json().at("copy").as_string() == "update");
    params = d.params;
    REQUIRE(writer.arm(params, state, 4 * d.buffers.size()));
    writer.disarm();
  }
  ::setenv("RINGTRAIN_TEST_SNAPSHOT_COPY_ON_THREAD", "1", 1);
  SnapshotWriter forced(comm, temp_dir() / "ram2", 2, bytes, d.meta.dump(2).size(), [](const std::string&) {});
  ::unsetenv("RINGTRAIN_TEST_SNAPSHOT_COPY_ON_THREAD");
  forced.copy_on_thread(false);
  CHECK(forced.copies_on_thread());
  CHECK_FALSE(forced.arm(params, state, 4 * d.buffers.size()));
}

TEST_CASE("SnapshotWriter::warm rewrites only the spare files, once; the snapshots stay whole and the next is taken") {
  const auto root = temp_dir() / "ram";
  CheckpointData d = sample();
  SelfCommunicator comm;
  SnapshotWriter writer(comm, root, 2, 4 * (d.params.size() + d.buffers.size() + d.optimizer_state.size()),
                        d.meta.dump(2).size(), [](const std::string&) {});
  std::vector<float> params = d.params, state = d.optimizer_state;
  const auto take = [&](std::int64_t step) {
    d.meta.set("global_step", step);
    for (float& p : params) p += 1.0f;
    REQUIRE(writer.take(step, params, d.buffers, state, d.meta) == SnapshotWriter::Taken::kYes);
    writer.finish();  // the thread done (one node: nothing to exchange)
  };
  take(10);
  take(20);
  const std::vector<float> params_20 = params;
  // A spare holds an older state's bytes (no zero run as long as the file); warm() zeroes it.
  const auto spares = [&] {
    std::vector<std::filesystem::path> found;
    for (const auto& e : std::filesystem::directory_iterator(writer.own_dir())) {
      if (e.path().extension() == ".tmp") found.push_back(e.path());
    }
    return found;
  };
  const auto all_zero = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return !bytes.empty() && std::all_of(bytes.begin(), bytes.end(), [](char c) { return c == 0; });
  };
  take(30);  // step 10's file becomes the spare
  REQUIRE(spares().size() == 1);
  CHECK_FALSE(all_zero(spares()[0]));
  writer.warm();
  writer.finish();
  CHECK(all_zero(spares()[0]));
  for (const std::int64_t step : {20, 30}) {
    const auto path = writer.own_dir() / snapshot_file_name(step);
    const CheckpointData back = Checkpoint::deserialize(Checkpoint::read_file(path), path.string());
    CHECK(back.meta.at("global_step").as_int() == step);
    if (step == 20) CHECK(same_bits(back.params, params_20));
  }
  take(40);  // warm() released the files: not busy
  const auto path = writer.own_dir() / snapshot_file_name(40);
  CHECK(same_bits(Checkpoint::deserialize(Checkpoint::read_file(path), path.string()).params, params));
  // Only the first call does anything: the new spare (step 20's file) keeps its bytes.
  writer.warm();
  writer.finish();
  REQUIRE(spares().size() == 1);
  CHECK_FALSE(all_zero(spares()[0]));
  CHECK(writer.stats().written == 4);
  CHECK(writer.stats().skipped == 0);
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

TEST_CASE("SnapshotDigest: round trip; the same state only with every field equal and both held") {
  SnapshotDigest a{20, true, 12000, {1u, 2u, 3u, 4u}};
  const auto bytes = a.encode();
  const SnapshotDigest back = SnapshotDigest::decode(bytes);
  CHECK(back.same_state(a));
  CHECK(back.step == 20);
  CHECK(back.state_bytes == 12000);
  CHECK_THROWS(SnapshotDigest::decode(std::span<const std::byte>(bytes).first(bytes.size() - 1)));
  for (int field = 0; field < 7; ++field) {
    SnapshotDigest b = a;
    if (field == 0) b.step = 30;
    if (field == 1) b.held = false;
    if (field == 2) b.state_bytes = 12004;
    if (field >= 3) b.crc[static_cast<std::size_t>(field - 3)] ^= 0x100u;
    INFO("field " << field);
    CHECK(!a.same_state(b));
    CHECK(!b.same_state(a));
    CHECK(!SnapshotDigest::decode(b.encode()).same_state(a));
  }
  SnapshotDigest none{20, false, 0, {}};
  CHECK(!none.same_state(none));  // no snapshot is no copy of one
}

TEST_CASE("state_meta_crc: the nodes' wall-clock times and config do not count, the training position does") {
  const Json m = valid_meta();
  const std::uint32_t crc = state_meta_crc(m);
  auto changed = [&](const std::string& key, Json value) {
    Json c = Json::object();
    for (const auto& [k, v] : m.as_object()) c.set(k, k == key ? value : v);
    return state_meta_crc(c);
  };
  CHECK(changed("elapsed_s", 99.0) == crc);
  CHECK(changed("epoch_seconds", 1.5) == crc);
  CHECK(changed("config", Json::object()) == crc);
  for (const char* key : {"global_step", "epoch", "step_in_epoch", "epoch_loss_sum", "epoch_correct", "epoch_count",
                          "optimizer_steps", "seed", "signature", "world_size", "batch_size", "lr"}) {
    INFO(key);
    CHECK(changed(key, 7777) != crc);
  }
}
