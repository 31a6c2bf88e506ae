// What a node's SnapshotWriter has done in a run: its counters, and their summary.json form.
#pragma once

#include <cstdint>
#include <filesystem>

#include "common/Json.h"

namespace ringtrain {

struct SnapshotStats {
  std::int64_t written = 0;        // own snapshots complete on this node
  std::int64_t skipped = 0;        // due while the previous one was still being written
  std::int64_t failed = 0;         // own or received copies not written (the previous ones stay)
  std::int64_t replicated = 0;     // own snapshots the next node's own one of that step replicates (equal digests)
  std::int64_t sent = 0;           // whole copies sent to the next node (its own of that step differed, or none)
  std::int64_t received = 0;       // whole copies from the previous node written here
  std::int64_t bytes = 0;          // size of the last snapshot
  std::int64_t captured = 0;       // own snapshots whose state the optimizer update captured (arm())
  double thread_cpu_seconds = 0.0;  // CPU time of the snapshot thread (copies, CRC, seal, rename)
  std::int64_t fence_waits = 0;     // fence() calls that found the thread still copying
  double fence_wait_seconds = 0.0;  // the main thread's (wall) time in them

  // summary.json's "snapshots": these counters, the snapshot directory `dir`, and where the
  // state was copied (`copy_on_thread`: the snapshot thread, else the optimizer update).
  Json to_json(const std::filesystem::path& dir, bool copy_on_thread) const;
};

}  // namespace ringtrain
