// Reusable, mapped snapshot files (SnapshotSlots.h).
#include "checkpoint/SnapshotSlots.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "checkpoint/SnapshotStore.h"
#include "checkpoint/StreamCopy.h"

namespace ringtrain {
namespace {

namespace fs = std::filesystem;

// Room for the metadata section to grow by a few bytes between snapshots (its numbers get
// longer) without mapping again.
constexpr std::size_t kMapSlack = 64 * 1024;

std::size_t page_rounded(std::size_t bytes) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

// Makes the mapping's pages of [from, to) present and written once, now: off the step's
// path, so that the copy at the step boundary runs at memory speed. The first store to
// each new page of a shared file mapping is what costs: a fault even where the page exists,
// and on this project's (virtual) test machines another trap per page even after
// MADV_POPULATE_WRITE has made the page tables. Measured on a 12 MB tmpfs file (mlp's
// snapshot), loaded 2-core VM: the first copy into a fresh mapping 106-135 ms, after
// MADV_POPULATE_WRITE 28-31 ms, after that and one store per page 1-3 ms, as every later
// copy into the same pages; the populate and stores themselves 32-34 ms, once per slot.
// The pages are written whole with streaming stores, as the capture writes them: after one
// ordinary store per page the capture's first streaming copy into the file still took
// 0.9-4.1 ms (CPU, 12 MB, a later one 0.8-0.9 ms), after a streaming pass 0.8-1.2 ms
// (micro-measurements on the 2-core VM, 2026-11-26).
void make_writable(std::byte* map, std::size_t from, std::size_t to) noexcept {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t start = from / page * page;
  if (to <= start) return;
#ifdef MADV_POPULATE_WRITE
  (void)::madvise(map + start, page_rounded(to) - start, MADV_POPULATE_WRITE);  // Linux 5.14+; else faults below
#endif
  stream_zero(map + start, to - start);  // a spare: what it held does not matter
  stream_fence();
}

std::runtime_error file_error(const fs::path& path, const char* what, int err) {
  return std::runtime_error(fmt::format("{}: {} failed: {}", path.string(), what, std::strerror(err)));
}

}  // namespace

SnapshotSlots::SnapshotSlots(fs::path dir, int keep) : dir_(std::move(dir)), keep_(keep) {}

SnapshotSlots::~SnapshotSlots() {
  for (Slot& s : slots_) {
    if (s.map) ::munmap(s.map, s.mapped);
    if (s.fd >= 0) ::close(s.fd);
  }
}

std::size_t SnapshotSlots::create() {
  fs::create_directories(dir_);
  Slot s;
  s.spare_path = dir_ / fmt::format("slot-{}.tmp", next_name_++);
  // Not O_TRUNC: a .tmp left by a killed launch is reused as it is.
  s.fd = ::open(s.spare_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (s.fd < 0) throw file_error(s.spare_path, "open", errno);
  slots_.push_back(std::move(s));
  return slots_.size() - 1;
}

std::size_t SnapshotSlots::spare() {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].step < 0) return i;
  }
  return create();
}

std::size_t SnapshotSlots::ready(std::size_t index, std::size_t bytes) {
  Slot& s = slots_[index];
  try {
    if (s.size != bytes && ::ftruncate(s.fd, static_cast<off_t>(bytes)) != 0) throw file_error(s.spare_path, "ftruncate", errno);
    s.size = bytes;
    if (bytes < s.reserved) s.reserved = bytes;  // truncating freed the rest
    std::size_t fresh = s.reserved;               // from here on, pages not yet writable in the mapping
    if (bytes > s.reserved) {
      // Only the part not reserved yet: over reserved pages tmpfs's fallocate still walks them.
      const int err = ::posix_fallocate(s.fd, static_cast<off_t>(s.reserved), static_cast<off_t>(bytes - s.reserved));
      if (err != 0) throw file_error(s.spare_path, fmt::format("reserving {} bytes", bytes).c_str(), err);
      s.reserved = bytes;
    }
    if (bytes > s.mapped) {
      if (s.map) ::munmap(s.map, s.mapped);
      s.map = nullptr;
      const std::size_t length = page_rounded(bytes + kMapSlack);
      void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd, 0);
      if (p == MAP_FAILED) throw file_error(s.spare_path, "mmap", errno);
      s.map = static_cast<std::byte*>(p);
      s.mapped = length;
      fresh = 0;
    }
    make_writable(s.map, fresh, bytes);
  } catch (...) {
    // Its pages are what a full filesystem lacks: the file goes.
    drop(index);
    throw;
  }
  return index;
}

void SnapshotSlots::prepare(std::size_t bytes) { (void)ready(spare(), bytes); }

void SnapshotSlots::prepare_all(std::size_t bytes) {
  while (slots_.size() < static_cast<std::size_t>(keep_) + 1) (void)ready(create(), bytes);
}

void SnapshotSlots::rewrite_spares() noexcept {
  for (Slot& s : slots_) {
    if (s.step < 0 && s.map) stream_zero(s.map, s.size);
  }
  stream_fence();
}

std::span<std::byte> SnapshotSlots::open(std::size_t bytes) {
  open_ = -1;
  const std::size_t index = ready(spare(), bytes);
  open_ = static_cast<int>(index);
  return {slots_[index].map, bytes};
}

void SnapshotSlots::drop(std::size_t index) noexcept {
  Slot& s = slots_[index];
  if (s.map) ::munmap(s.map, s.mapped);
  if (s.fd >= 0) ::close(s.fd);
  ::unlink(s.spare_path.c_str());
  slots_.erase(slots_.begin() + static_cast<std::ptrdiff_t>(index));
  open_ = -1;
}

void SnapshotSlots::commit(std::int64_t step) {
  if (open_ < 0) throw std::logic_error("SnapshotSlots::commit without an open slot");
  Slot& s = slots_[static_cast<std::size_t>(open_)];
  const fs::path name = dir_ / snapshot_file_name(step);
  open_ = -1;
  if (::rename(s.spare_path.c_str(), name.c_str()) != 0) {
    throw std::runtime_error(fmt::format("{}: cannot rename {} onto it: {}", name.string(),
                                         s.spare_path.filename().string(), std::strerror(errno)));
  }
  // A snapshot of this step in another slot (a history replayed) was just replaced.
  for (Slot& other : slots_) {
    if (other.step == step) other.step = -2;  // its file is gone: rebuilt as a spare below
  }
  s.step = step;
  prune();
}

void SnapshotSlots::prune() {
  for (std::size_t i = 0; i < slots_.size();) {
    if (slots_[i].step == -2) {
      drop(i);
    } else {
      ++i;
    }
  }
  const std::vector<SnapshotFile> found = snapshots_in_dir(dir_);
  const std::size_t excess = found.size() > static_cast<std::size_t>(keep_) ? found.size() - keep_ : 0;
  for (std::size_t i = 0; i < excess; ++i) {
    Slot* mine = nullptr;
    for (Slot& s : slots_) {
      if (s.step == found[i].step) mine = &s;
    }
    std::error_code ec;
    if (mine && ::rename(found[i].path.c_str(), mine->spare_path.c_str()) == 0) {
      mine->step = -1;
    } else {
      fs::remove(found[i].path, ec);
    }
  }
}

}  // namespace ringtrain
