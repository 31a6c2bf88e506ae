// What one node tells the previous one about its own RAM snapshot of a step, so that the
// previous node can tell whether that snapshot already replicates its own (SnapshotWriter.h,
// "Replication"). In a synchronous run every rank ends a step with the same parameters,
// optimizer state and (averaged, or per logical shard) buffers, bit for bit, so each node's
// own snapshot of step s holds the same training state as every other node's: then the next
// node holds a copy already, and only this digest, not the 12 MB of a mlp snapshot, has to
// cross the link. The digest names the step and the CRC32s of the sections that make the
// training state: the parameters, buffers and optimizer state (as sealed in the file) and
// the metadata's training position (state_meta_crc(): the metadata without the fields that
// legitimately differ between nodes). Equal digests are what "the next node holds the same
// state" means here; anything else (a different CRC, a snapshot the next node skipped or
// could not write) makes the previous node send its own snapshot whole, as before.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "common/Json.h"

namespace ringtrain {

struct SnapshotDigest {
  static constexpr std::size_t kSections = 4;
  static constexpr std::size_t kBytes = 8 + 8 + 8 + 4 * kSections;  // encode()'s size

  std::int64_t step = -1;
  bool held = false;  // false: the node has no complete snapshot of `step` (skipped, not written)
  std::uint64_t state_bytes = 0;  // the sizes of the parameters, buffers and optimizer state sections
  // [0]: state_meta_crc() of the metadata; [1], [2], [3]: the CRC32s sealed in the file for
  // the parameters, the buffers and the optimizer state.
  std::array<std::uint32_t, kSections> crc{};

  // Both held, of one step, the same sizes and CRC32s: the two snapshots hold the same state.
  bool same_state(const SnapshotDigest& other) const noexcept {
    return held && other.held && step == other.step && state_bytes == other.state_bytes && crc == other.crc;
  }

  std::array<std::byte, kBytes> encode() const noexcept;
  // Throws std::runtime_error when `bytes` is not kBytes long.
  static SnapshotDigest decode(std::span<const std::byte> bytes);
};

// The metadata fields that differ between the nodes' snapshots of one step although their
// training state is the same: the wall-clock times (each rank's own clock) and the run's
// configuration (whose paths, such as an explicit --snapshot-dir, may be each node's own).
// A resume takes none of them as training state (RunCheckpoint.h: checkpoint_point()).
inline constexpr std::array<const char*, 3> kPerNodeMetaKeys{"elapsed_s", "epoch_seconds", "config"};

// The CRC32 of the metadata's compact text without kPerNodeMetaKeys: the step, epoch and
// position in it, the epoch's sums, the optimizer's steps, the seed, the model's signature,
// the world size and batch. Equal on every node of a synchronous run at one step.
std::uint32_t state_meta_crc(const Json& meta);

}  // namespace ringtrain
