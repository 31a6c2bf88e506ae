// RAM snapshot files and their digests: SnapshotSlots writes in place and keeps the newest,
// SnapshotDigest and state_meta_crc say whether two nodes hold the same state.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "checkpoint/Checkpoint.h"
#include "checkpoint/SnapshotDigest.h"
#include "checkpoint/SnapshotSlots.h"
#include "checkpoint/SnapshotStore.h"
#include "checkpoint_test_util.h"

using namespace ringtrain;
using namespace ringtrain::test;
using Catch::Matchers::Contains;

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
