// The checkpoint file: a JSON metadata section and the flat buffers (parameters,
// non-trained buffers, optimizer state), each section with its own CRC32. Writes are
// atomic (temporary file, fsync, rename), so a crash mid-write leaves the previous
// checkpoint intact.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/Json.h"

namespace ringtrain {

struct CheckpointData {
  // format_version, model, signature, world_size, global_step, epoch, step_in_epoch,
  // seed, optimizer, optimizer_steps, epoch partial sums, config, ...
  Json meta;
  std::vector<float> params;
  std::vector<float> buffers;
  std::vector<float> optimizer_state;
};

// A checkpoint's contents where they already live (the model's parameter and buffer arenas,
// the optimizer's state): what a run writes, without copying the sections first.
struct CheckpointView {
  const Json& meta;
  std::span<const float> params;
  std::span<const float> buffers;
  std::span<const float> optimizer_state;
};

// Where each section's bytes go in a serialised checkpoint: meta, params, buffers,
// optimizer, back to back after the header and section table.
struct CheckpointLayout {
  static constexpr std::size_t kSections = 4;
  std::array<std::size_t, kSections> offset{};
  std::array<std::size_t, kSections> size{};
  std::size_t total = 0;
};

class Checkpoint {
 public:
  static constexpr std::uint32_t kFormatVersion = 1;

  // Serialising in place (what RAM snapshots do: the state is copied straight into the
  // file's mapped pages at the step boundary, and another thread checksums it): the layout
  // for sections of these sizes in bytes; the caller copies each section's bytes to its
  // offset, then seal() writes the header and the section table with every section's
  // CRC32. serialize_into() is exactly these steps.
  static CheckpointLayout layout(std::size_t meta_bytes, std::size_t params_bytes, std::size_t buffers_bytes,
                                 std::size_t optimizer_bytes);
  // image: layout.total bytes with the sections in place.
  static void seal(std::span<std::byte> image, const CheckpointLayout& layout);
  // The same, with the CRC32s of the sections whose entry is set already known (a RAM
  // snapshot computes its state's while it is still in cache: SnapshotWriter.h); the others
  // are computed here. Returns every section's CRC32 as written to the section table (what
  // a snapshot's digest for the previous node is made of: SnapshotDigest.h).
  using KnownCrcs = std::array<std::optional<std::uint32_t>, CheckpointLayout::kSections>;
  using SectionCrcs = std::array<std::uint32_t, CheckpointLayout::kSections>;
  static SectionCrcs seal(std::span<std::byte> image, const CheckpointLayout& layout, const KnownCrcs& known);

  // Serialises to the on-disk byte layout.
  static std::vector<std::byte> serialize(const CheckpointData& data);
  // The same into `out`, resized: a buffer serialised into again keeps its memory (no
  // allocation, no page faults: what a snapshot every few steps wants).
  static void serialize_into(const CheckpointData& data, std::vector<std::byte>& out);
  // Parses and validates bytes; `source` names the file in errors. Throws
  // std::runtime_error "<source>: <section>: <problem>".
  static CheckpointData deserialize(std::span<const std::byte> bytes, const std::string& source);
  // Every check deserialize() makes, without copying the sections out; the metadata.
  static Json verify(std::span<const std::byte> bytes, const std::string& source);

  // kFsync: survives a machine crash. kRenameOnly: for files in RAM (/dev/shm), which a
  // crash loses anyway; still atomic for the processes that read it.
  enum class Durability { kFsync, kRenameOnly };
  // Atomic write: <path>.tmp, fsync, rename over path, fsync the directory (the fsyncs only
  // with kFsync). Returns bytes.
  static std::size_t write(const std::filesystem::path& path, std::span<const std::byte> bytes,
                           Durability durability = Durability::kFsync);
  // The same file serialize() would give for these contents, written the same atomic way
  // straight from where the sections live: no copy of them in memory, so a checkpoint costs
  // no memory beyond its header. Returns bytes.
  // For tests only: RINGTRAIN_TEST_CHECKPOINT_HOLD_MS=<ms> makes every write (either form)
  // pause that long once its first part is in <path>.tmp: a writer held inside the write,
  // long enough for a test to stop it there (test/train/stall_random_test.py
  // --checkpoint-write).
  static std::size_t write(const std::filesystem::path& path, const CheckpointView& view,
                           Durability durability = Durability::kFsync);
  // Reads the whole file (throws naming the path if missing or unreadable).
  static std::vector<std::byte> read_file(const std::filesystem::path& path);

  // The newest checkpoint in dir (by global step in the name), or empty if none.
  static std::filesystem::path latest_in(const std::filesystem::path& dir);
  // ckpt-<global_step, 9 digits>.rtck
  static std::string file_name(std::int64_t global_step);
  // Deletes all but the newest `keep` checkpoints in dir (keep 0: none deleted).
  static void prune(const std::filesystem::path& dir, int keep);
};

}  // namespace ringtrain
