// The files of a run's RAM snapshots (SnapshotStore.h).
#include "checkpoint/SnapshotStore.h"

#include <algorithm>
#include <system_error>

#include <fmt/format.h>

#include "checkpoint/Checkpoint.h"
#include "common/Fnv1a.h"

namespace ringtrain {
namespace {

namespace fs = std::filesystem;

// The step of snap-<9 digits>.rtck, or -1 for any other name (.tmp files included).
std::int64_t step_of(const std::string& name) {
  if (name.size() != 19 || name.rfind("snap-", 0) != 0 || name.substr(14) != ".rtck") return -1;
  const std::string digits = name.substr(5, 9);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return -1;
  return std::stoll(digits);
}

}  // namespace

std::vector<SnapshotFile> snapshots_in_dir(const fs::path& dir) {
  std::vector<SnapshotFile> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::int64_t step = step_of(it->path().filename().string());
    if (step >= 0) found.push_back({step, it->path()});
  }
  std::sort(found.begin(), found.end(), [](const SnapshotFile& a, const SnapshotFile& b) { return a.step < b.step; });
  return found;
}

std::string snapshot_run_id(const fs::path& run_dir) {
  std::error_code ec;
  fs::path full = fs::weakly_canonical(fs::absolute(run_dir), ec);
  if (ec) full = fs::absolute(run_dir).lexically_normal();
  std::string name = full.filename().string();
  if (name.empty()) name = "run";
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  return fmt::format("{}-{:016x}", name, fnv1a64(full.string()));
}

fs::path default_snapshot_root(const fs::path& run_dir) {
  std::error_code ec;
  const fs::path shm = fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
  return shm / ("ringtrain-" + snapshot_run_id(run_dir));
}

fs::path snapshot_node_dir(const fs::path& root, int node, int nodes) {
  return root / fmt::format("node-{}-of-{}", node, nodes);
}

fs::path snapshot_peer_dir(const fs::path& node_dir, int from_node) {
  return node_dir / fmt::format("from-node-{}", from_node);
}

std::string snapshot_file_name(std::int64_t step) { return fmt::format("snap-{:09d}.rtck", step); }

std::vector<SnapshotFile> list_snapshots(const fs::path& root) {
  std::vector<SnapshotFile> all;
  std::error_code ec;
  // Two levels: node-*/ and node-*/from-node-*/ (a relaunch at another node count adds
  // node-*-of-<n'>/ beside the old ones; all of them count).
  for (fs::directory_iterator node(root, ec), end; !ec && node != end; node.increment(ec)) {
    if (!node->is_directory(ec)) continue;
    for (auto& f : snapshots_in_dir(node->path())) all.push_back(std::move(f));
    std::error_code ec2;
    for (fs::directory_iterator sub(node->path(), ec2), end2; !ec2 && sub != end2; sub.increment(ec2)) {
      if (!sub->is_directory(ec2)) continue;
      for (auto& f : snapshots_in_dir(sub->path())) all.push_back(std::move(f));
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const SnapshotFile& a, const SnapshotFile& b) {
    return a.step != b.step ? a.step > b.step : a.path < b.path;
  });
  return all;
}

std::optional<FoundSnapshot> newest_complete_snapshot(const fs::path& root,
                                                      const std::function<void(const std::string&)>& skipped) {
  for (const SnapshotFile& f : list_snapshots(root)) {
    try {
      std::vector<std::byte> bytes = Checkpoint::read_file(f.path);
      const CheckpointData data = Checkpoint::deserialize(bytes, f.path.string());
      if (data.meta.at("global_step").as_int() != f.step) {
        throw std::runtime_error(fmt::format("{}: meta: global_step {} does not match the file name", f.path.string(),
                                             data.meta.at("global_step").as_int()));
      }
      return FoundSnapshot{f, std::move(bytes)};
    } catch (const std::exception& e) {
      skipped(e.what());
    }
  }
  return std::nullopt;
}

std::string remove_snapshot_root(const fs::path& root) {
  // Another node's leader on the same filesystem may delete entries under our iteration:
  // a few rounds until the root is gone.
  std::error_code ec;
  for (int round = 0; round < 5; ++round) {
    fs::remove_all(root, ec);
    std::error_code exists_ec;
    if (!fs::exists(root, exists_ec)) return {};
  }
  return fmt::format("{}: cannot remove: {}", root.string(), ec ? ec.message() : "it stays");
}

}  // namespace ringtrain
