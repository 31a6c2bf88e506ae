// A directory's RAM snapshot files kept as reusable slots. A new tmpfs file for every
// snapshot pays for allocating, zeroing and later freeing all its pages on each write
// (about 10 ms of the snapshot thread for mlp's 12 MB, more than its CRC32s); here the file
// of a snapshot pruned away is kept as a spare, mapped once, and a later snapshot is copied
// straight into its pages (no serialised copy in between, no write(2)).
//
// The name is the commit: a slot is slot-<i>.tmp while it is filled and checksummed and is
// renamed to snap-<step>.rtck only once sealed (Checkpoint::seal), so a file under a
// snapshot name is always complete; a process killed at any moment leaves at most one
// .tmp (never read: SnapshotStore.h lists snap-*.rtck only) beside the newest `keep`
// complete snapshots, which a write never touches. Files only; one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace ringtrain {

class SnapshotSlots {
 public:
  // dir: where the snapshots go (created on first use); keep: complete snapshots kept.
  SnapshotSlots(std::filesystem::path dir, int keep);
  // Unmaps and closes; the files stay (the run removes its snapshot root at its end).
  ~SnapshotSlots();
  SnapshotSlots(const SnapshotSlots&) = delete;
  SnapshotSlots& operator=(const SnapshotSlots&) = delete;

  // A spare slot (a new file for the first keep + 1) of exactly `bytes` bytes, its pages
  // reserved (posix_fallocate: a full filesystem fails here, not as a SIGBUS on a later
  // store) and mapped. Throws std::runtime_error naming the file; the snapshots stay.
  std::span<std::byte> open(std::size_t bytes);
  // Makes a spare ready for a later open() of up to about `bytes` (created, reserved,
  // mapped, every page written once), so that open() has nothing left to do but set the
  // exact size. The snapshot thread calls it after each commit. Throws as open() does.
  void prepare(std::size_t bytes);
  // The same for all keep + 1 files at once: before the first step, where a run's setup
  // pays for the pages once instead of the steps that the first snapshots land in.
  void prepare_all(std::size_t bytes);
  // Writes every spare's pages once more (streaming zeros), so that the next copy into
  // them finds them ready: on this project's (PVM) test machines the pages a run's set-up
  // made ready were slow again at the first snapshots (SnapshotWriter::warm() says why).
  void rewrite_spares() noexcept;
  // Renames the open slot to snap-<step>.rtck, then keeps the newest `keep` snapshots in
  // dir: this object's older ones become spares, any other (an earlier launch's) is removed.
  // Throws naming the file if the rename fails (the slot stays a spare).
  void commit(std::int64_t step);
  // The open slot is not committed (a failed write): it stays a spare.
  void abandon() noexcept { open_ = -1; }

  const std::filesystem::path& dir() const noexcept { return dir_; }

 private:
  struct Slot {
    std::filesystem::path spare_path;  // its name while not holding a complete snapshot
    int fd = -1;
    std::byte* map = nullptr;
    std::size_t mapped = 0;    // length of the mapping
    std::size_t reserved = 0;  // bytes whose pages posix_fallocate reserved
    std::size_t size = 0;      // the file's size
    std::int64_t step = -1;    // the snapshot it holds under snap-<step>.rtck; -1: a spare
  };
  std::size_t create();
  std::size_t spare();
  std::size_t ready(std::size_t index, std::size_t bytes);
  void prune();
  void drop(std::size_t index) noexcept;

  std::filesystem::path dir_;
  int keep_;
  std::vector<Slot> slots_;
  int open_ = -1;
  int next_name_ = 0;
};

}  // namespace ringtrain
