// Checkpoint serialisation. Layout (little-endian):
//   "RINGTRCK" | u32 format version | u32 section count |
//   section table: { char name[16]; u64 offset; u64 size; u32 crc32; u32 reserved } x count |
//   u32 crc32 of everything above | section payloads.
#include "checkpoint/Checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "checkpoint/CheckpointMeta.h"
#include "checkpoint/Crc32.h"

namespace ringtrain {
namespace {

constexpr std::array<char, 8> kMagic = {'R', 'I', 'N', 'G', 'T', 'R', 'C', 'K'};
constexpr std::size_t kNameBytes = 16;
constexpr std::size_t kEntryBytes = kNameBytes + 8 + 8 + 4 + 4;
constexpr std::size_t kPreambleBytes = kMagic.size() + 4 + 4;
constexpr const char* kSectionNames[] = {"meta", "params", "buffers", "optimizer"};

std::uint32_t crc32_of(std::span<const std::byte> bytes) { return checkpoint_crc32(bytes); }

// Writes into a buffer sized up front (vector::insert of bytes trips a GCC 12
// -Wstringop-overflow false positive, and one allocation is cheaper anyway).
class ByteWriter {
 public:
  explicit ByteWriter(std::span<std::byte> out) : out_(out) {}
  void bytes(const void* p, std::size_t n) {
    if (n > 0) std::memcpy(out_.data() + pos_, p, n);
    pos_ += n;
  }
  template <typename T>
  void put(T value) {
    bytes(&value, sizeof(T));
  }
  std::size_t pos() const noexcept { return pos_; }

 private:
  std::span<std::byte> out_;
  std::size_t pos_ = 0;
};

template <typename T>
T get(std::span<const std::byte> bytes, std::size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

// A section's floats (its size checked by checked_meta).
std::vector<float> floats_from(std::span<const std::byte> bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

}  // namespace

std::vector<std::byte> Checkpoint::serialize(const CheckpointData& data) {
  std::vector<std::byte> out;
  serialize_into(data, out);
  return out;
}

CheckpointLayout Checkpoint::layout(std::size_t meta_bytes, std::size_t params_bytes, std::size_t buffers_bytes,
                                    std::size_t optimizer_bytes) {
  static_assert(CheckpointLayout::kSections == std::size(kSectionNames));
  CheckpointLayout l;
  l.size = {meta_bytes, params_bytes, buffers_bytes, optimizer_bytes};
  std::size_t offset = kPreambleBytes + CheckpointLayout::kSections * kEntryBytes + 4;
  for (std::size_t i = 0; i < CheckpointLayout::kSections; ++i) {
    l.offset[i] = offset;
    offset += l.size[i];
  }
  l.total = offset;
  return l;
}

namespace {

// The header and section table for sections with these CRC32s, into `header` (the bytes
// before the first section).
void write_header(std::span<std::byte> header, const CheckpointLayout& layout,
                  const std::array<std::uint32_t, CheckpointLayout::kSections>& crcs) {
  constexpr std::uint32_t count = CheckpointLayout::kSections;
  ByteWriter w(header);
  w.bytes(kMagic.data(), kMagic.size());
  w.put<std::uint32_t>(Checkpoint::kFormatVersion);
  w.put<std::uint32_t>(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    std::array<char, kNameBytes> name{};
    std::strncpy(name.data(), kSectionNames[i], kNameBytes - 1);
    w.bytes(name.data(), kNameBytes);
    w.put<std::uint64_t>(layout.offset[i]);
    w.put<std::uint64_t>(layout.size[i]);
    w.put<std::uint32_t>(crcs[i]);
    w.put<std::uint32_t>(0);
  }
  w.put<std::uint32_t>(crc32_of(header.first(w.pos())));
}

using Payloads = std::array<std::span<const std::byte>, CheckpointLayout::kSections>;

// The sections' bytes in file order; meta_text must outlive the result.
Payloads payloads_of(const std::string& meta_text, std::span<const float> params, std::span<const float> buffers,
                     std::span<const float> optimizer_state) {
  return {std::as_bytes(std::span(meta_text.data(), meta_text.size())), std::as_bytes(params),
          std::as_bytes(buffers), std::as_bytes(optimizer_state)};
}

CheckpointLayout layout_of(const Payloads& payloads) {
  return Checkpoint::layout(payloads[0].size(), payloads[1].size(), payloads[2].size(), payloads[3].size());
}

}  // namespace

void Checkpoint::seal(std::span<std::byte> image, const CheckpointLayout& layout) { seal(image, layout, {}); }

Checkpoint::SectionCrcs Checkpoint::seal(std::span<std::byte> image, const CheckpointLayout& layout,
                                         const KnownCrcs& known) {
  if (image.size() != layout.total) {
    throw std::invalid_argument(fmt::format("Checkpoint::seal: image of {} bytes, layout of {}", image.size(),
                                            layout.total));
  }
  SectionCrcs crcs{};  // first: the sections are the bulk of the bytes
  for (std::size_t i = 0; i < crcs.size(); ++i) {
    crcs[i] = known[i] ? *known[i] : crc32_of(image.subspan(layout.offset[i], layout.size[i]));
  }
  write_header(image.first(layout.offset[0]), layout, crcs);
  return crcs;
}

void Checkpoint::serialize_into(const CheckpointData& data, std::vector<std::byte>& out) {
  const std::string meta_text = data.meta.dump(2);
  const Payloads payloads = payloads_of(meta_text, data.params, data.buffers, data.optimizer_state);
  const CheckpointLayout l = layout_of(payloads);
  out.resize(l.total);  // every byte is written below
  for (std::size_t i = 0; i < CheckpointLayout::kSections; ++i) {
    if (!payloads[i].empty()) std::memcpy(out.data() + l.offset[i], payloads[i].data(), payloads[i].size());
  }
  seal(out, l);
}

namespace {

using Sections = std::array<std::span<const std::byte>, CheckpointLayout::kSections>;

// Every section of a serialised checkpoint, after checking the header, the section table
// and each section's CRC32.
Sections checked_sections(std::span<const std::byte> bytes, const std::string& source) {
  auto fail = [&](const std::string& section, const std::string& what) -> std::runtime_error {
    return std::runtime_error(fmt::format("{}: {}: {}", source, section, what));
  };
  if (bytes.size() < kPreambleBytes ||
      std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0) {
    throw fail("header", "not a ringtrain checkpoint (bad magic)");
  }
  const auto version = get<std::uint32_t>(bytes, 8);
  if (version != Checkpoint::kFormatVersion) {
    throw fail("header", fmt::format("format version {} is not supported (expected {})", version,
                                     Checkpoint::kFormatVersion));
  }
  const auto count = get<std::uint32_t>(bytes, 12);
  if (count != std::size(kSectionNames)) {
    throw fail("header", fmt::format("{} sections, expected {}", count, std::size(kSectionNames)));
  }
  const std::size_t table_end = kPreambleBytes + count * kEntryBytes;
  if (bytes.size() < table_end + 4) throw fail("header", "file truncated inside the section table");
  if (crc32_of(bytes.first(table_end)) != get<std::uint32_t>(bytes, table_end)) {
    throw fail("header", "CRC32 mismatch in the section table (corrupt file)");
  }

  Sections sections;
  std::uint64_t expected_offset = table_end + 4;  // payloads follow the table back to back
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::size_t entry = kPreambleBytes + i * kEntryBytes;
    char name[kNameBytes + 1] = {};
    std::memcpy(name, bytes.data() + entry, kNameBytes);
    if (std::string(name) != kSectionNames[i]) {
      throw fail("header", fmt::format("section {} is '{}', expected '{}'", i, name, kSectionNames[i]));
    }
    const auto offset = get<std::uint64_t>(bytes, entry + kNameBytes);
    const auto size = get<std::uint64_t>(bytes, entry + kNameBytes + 8);
    const auto crc = get<std::uint32_t>(bytes, entry + kNameBytes + 16);
    if (offset > bytes.size() || size > bytes.size() - offset) {
      throw fail(kSectionNames[i], fmt::format("needs bytes [{}, {}) but the file has {} (truncated)", offset,
                                               offset + size, bytes.size()));
    }
    if (offset != expected_offset) {
      throw fail(kSectionNames[i], fmt::format("starts at byte {}, expected {} (sections follow the table back to back)",
                                               offset, expected_offset));
    }
    expected_offset = offset + size;
    sections[i] = bytes.subspan(offset, size);
    if (crc32_of(sections[i]) != crc) throw fail(kSectionNames[i], "CRC32 mismatch (corrupt data)");
  }
  if (expected_offset != bytes.size()) {
    throw fail("trailer", fmt::format("{} unexpected bytes after the last section (the file should end at byte {})",
                                      bytes.size() - expected_offset, expected_offset));
  }

  return sections;
}

// The metadata of checked sections, validated against the sections' sizes.
Json checked_meta(const Sections& sections, const std::string& source) {
  Json meta;
  try {
    meta = Json::parse(std::string_view(reinterpret_cast<const char*>(sections[0].data()), sections[0].size()));
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("{}: meta: {}", source, e.what()));
  }
  for (std::size_t i = 1; i < sections.size(); ++i) {
    if (sections[i].size() % sizeof(float) != 0) {
      throw std::runtime_error(fmt::format("{}: section '{}': size {} is not a multiple of 4 bytes", source,
                                           kSectionNames[i], sections[i].size()));
    }
  }
  validate_checkpoint_meta(meta, sections[1].size() / sizeof(float), source);
  return meta;
}

}  // namespace

Json Checkpoint::verify(std::span<const std::byte> bytes, const std::string& source) {
  return checked_meta(checked_sections(bytes, source), source);
}

CheckpointData Checkpoint::deserialize(std::span<const std::byte> bytes, const std::string& source) {
  const Sections sections = checked_sections(bytes, source);
  CheckpointData data;
  data.meta = checked_meta(sections, source);
  data.params = floats_from(sections[1]);
  data.buffers = floats_from(sections[2]);
  data.optimizer_state = floats_from(sections[3]);
  return data;
}

namespace {

// The test hook RINGTRAIN_TEST_CHECKPOINT_HOLD_MS (Checkpoint.h): a pause inside the write.
void hold_for_test() {
  const char* v = std::getenv("RINGTRAIN_TEST_CHECKPOINT_HOLD_MS");
  char* end = nullptr;
  const long ms = v ? std::strtol(v, &end, 10) : 0;
  if (ms > 0 && *end == '\0') std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// Writes the parts, in order, into one file through a temporary file and a rename (see
// Checkpoint::write). Returns bytes.
std::size_t write_parts(const std::filesystem::path& path, std::span<const std::span<const std::byte>> parts,
                        Checkpoint::Durability durability) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  const std::filesystem::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw std::runtime_error(fmt::format("{}: cannot create: {}", tmp.string(), std::strerror(errno)));
  }
  // Any failure from here on closes the descriptor and removes the partial .tmp, so a
  // full disk leaves neither a leaked descriptor nor a stray file, and `path` untouched.
  auto fail = [&](const char* what, int err) -> std::runtime_error {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    return std::runtime_error(fmt::format("{}: {} failed: {}", tmp.string(), what, std::strerror(err)));
  };
  std::size_t total = 0;
  for (const std::span<const std::byte> bytes : parts) {
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw fail("write", errno);
      }
      done += static_cast<std::size_t>(n);
    }
    total += done;
    if (total == done) hold_for_test();  // the first part (the header) is in the .tmp
  }
  if (durability == Checkpoint::Durability::kFsync && ::fsync(fd) != 0) throw fail("fsync", errno);
  // close() reports deferred write errors on some filesystems (NFS): checked too.
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(fmt::format("{}: close failed: {}", tmp.string(), std::strerror(err)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(
        fmt::format("{}: cannot rename {} onto it: {}", path.string(), tmp.filename().string(), std::strerror(err)));
  }
  // The rename is durable only once the directory entry is.
  if (durability == Checkpoint::Durability::kRenameOnly) return total;
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return total;
}

}  // namespace

std::size_t Checkpoint::write(const std::filesystem::path& path, std::span<const std::byte> bytes, Durability durability) {
  const std::span<const std::byte> parts[] = {bytes};
  return write_parts(path, parts, durability);
}

std::size_t Checkpoint::write(const std::filesystem::path& path, const CheckpointView& view, Durability durability) {
  const std::string meta_text = view.meta.dump(2);
  const Payloads payloads = payloads_of(meta_text, view.params, view.buffers, view.optimizer_state);
  const CheckpointLayout l = layout_of(payloads);
  std::array<std::uint32_t, CheckpointLayout::kSections> crcs{};
  for (std::size_t i = 0; i < crcs.size(); ++i) crcs[i] = crc32_of(payloads[i]);
  std::vector<std::byte> header(l.offset[0]);
  write_header(header, l, crcs);
  const std::span<const std::byte> parts[] = {header, payloads[0], payloads[1], payloads[2], payloads[3]};
  return write_parts(path, parts, durability);
}

std::vector<std::byte> Checkpoint::read_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(fmt::format("{}: cannot open checkpoint: {}", path.string(), std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool dir = S_ISDIR(st.st_mode);
    ::close(fd);
    throw std::runtime_error(fmt::format("{}: {}, expected a checkpoint file (ckpt-<step>.rtck)", path.string(),
                                         dir ? "is a directory" : "is not a regular file"));
  }
  std::vector<std::byte> bytes(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::close(fd);
      throw std::runtime_error(fmt::format("{}: read failed after {} of {} bytes{}", path.string(), done, bytes.size(),
                                           err ? std::string(": ") + std::strerror(err) : std::string(" (file shrank)")));
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return bytes;
}

std::string Checkpoint::file_name(std::int64_t global_step) { return fmt::format("ckpt-{:09d}.rtck", global_step); }

namespace {

// Checkpoints in dir with their global steps, oldest first.
std::vector<std::pair<std::int64_t, std::filesystem::path>> list_checkpoints(const std::filesystem::path& dir) {
  std::vector<std::pair<std::int64_t, std::filesystem::path>> found;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return found;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() != 19 || name.rfind("ckpt-", 0) != 0 || name.substr(14) != ".rtck") continue;
    const std::string digits = name.substr(5, 9);
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    found.emplace_back(std::stoll(digits), entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

std::filesystem::path Checkpoint::latest_in(const std::filesystem::path& dir) {
  auto found = list_checkpoints(dir);
  return found.empty() ? std::filesystem::path() : found.back().second;
}

void Checkpoint::prune(const std::filesystem::path& dir, int keep) {
  if (keep <= 0) return;
  auto found = list_checkpoints(dir);
  const std::size_t excess = found.size() > static_cast<std::size_t>(keep) ? found.size() - keep : 0;
  for (std::size_t i = 0; i < excess; ++i) std::filesystem::remove(found[i].second);
}

}  // namespace ringtrain
