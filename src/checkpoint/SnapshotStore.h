// Where a run's RAM snapshots live and how they are found again after a lost node: the
// layout under the snapshot root, the run id that names the default root, the newest
// complete snapshot a rank can see, pruning, and removal. Files only; no MPI (SnapshotWriter
// moves the copies, RunCheckpoint.h chooses among what the ranks see).
//
//   <root>/node-<k>-of-<n>/snap-<step>.rtck               node k's own snapshot
//   <root>/node-<k>-of-<n>/from-node-<j>/snap-<step>.rtck  a whole copy node j sent to node k
//                                                         (where k's own differed: SnapshotWriter.h)
//
// Files are named by the node that holds them, so emulated nodes that share one /dev/shm
// never write the same file. A file is a checkpoint (Checkpoint.h: sections with CRC32s),
// written under a temporary name and renamed (SnapshotSlots.h), so a snapshot is either
// complete or absent under its name; a torn or corrupt one fails its CRC when read and is
// skipped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ringtrain {

// <run dir's last part>-<16 hex digits of a hash of its absolute path>: the same for every
// launch of one run directory (a relaunch finds the snapshots), different for two runs.
std::string snapshot_run_id(const std::filesystem::path& run_dir);
// /dev/shm/ringtrain-<run id> (the system's temporary directory where /dev/shm is missing).
std::filesystem::path default_snapshot_root(const std::filesystem::path& run_dir);

// node-<k>-of-<n>: what node k of n holds.
std::filesystem::path snapshot_node_dir(const std::filesystem::path& root, int node, int nodes);
// <node dir>/from-node-<j>: the whole copies node j sent to this node.
std::filesystem::path snapshot_peer_dir(const std::filesystem::path& node_dir, int from_node);
// snap-<step, 9 digits>.rtck
std::string snapshot_file_name(std::int64_t step);

struct SnapshotFile {
  std::int64_t step = 0;
  std::filesystem::path path;
};
// The snapshots directly in dir, oldest first.
std::vector<SnapshotFile> snapshots_in_dir(const std::filesystem::path& dir);
// Every snapshot file under root (any node, own or copy), newest step first.
std::vector<SnapshotFile> list_snapshots(const std::filesystem::path& root);

// The newest snapshot under root that reads back whole (every CRC right, metadata valid),
// with its bytes. Each newer one that does not is reported through `skipped` (its path and
// why), and the search goes on with the previous one.
struct FoundSnapshot {
  SnapshotFile file;
  std::vector<std::byte> bytes;
};
std::optional<FoundSnapshot> newest_complete_snapshot(const std::filesystem::path& root,
                                                      const std::function<void(const std::string&)>& skipped);

// Removes root and everything under it; another node sharing the filesystem may be removing
// it too. Returns an empty string, or why it could not.
std::string remove_snapshot_root(const std::filesystem::path& root);

}  // namespace ringtrain
