// ShardIndex: little-endian serialisation, every count checked against the bytes left
// before anything is allocated.
#include "datasets/ShardIndex.h"

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>
#include <zlib.h>

namespace ringtrain {
namespace {

constexpr char kIndexMagic[8] = {'R', 'T', 'P', 'A', 'C', 'K', 'I', 'X'};
// shard u32, offset u64, bytes, label, crc, width, height u32
constexpr std::uint64_t kRecordEntryBytes = 32;

class Out {
 public:
  void bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    data.insert(data.end(), b, b + n);
  }
  void u32(std::uint32_t v) { le(v, 4); }
  void u64(std::uint64_t v) { le(v, 8); }
  void f32(float v) {
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    u32(u);
  }
  std::vector<std::uint8_t> data;

 private:
  void le(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) data.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
};

class In {
 public:
  In(std::span<const std::uint8_t> bytes, const std::string& path) : bytes_(bytes), path_(path) {}
  std::uint64_t left() const { return bytes_.size() - at_; }
  void need(std::uint64_t n, const char* what) const {
    if (n > left())
      throw std::runtime_error(fmt::format("{}: truncated packed index: {} needs {} bytes, {} left", path_, what, n, left()));
  }
  std::uint64_t le(int n, const char* what) {
    need(static_cast<std::uint64_t>(n), what);
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(bytes_[at_ + i]) << (8 * i);
    at_ += static_cast<std::size_t>(n);
    return v;
  }
  std::uint32_t u32(const char* what) { return static_cast<std::uint32_t>(le(4, what)); }
  std::uint64_t u64(const char* what) { return le(8, what); }
  float f32(const char* what) {
    const std::uint32_t u = u32(what);
    float v;
    std::memcpy(&v, &u, 4);
    return v;
  }
  std::string text(std::uint64_t n, const char* what) {
    need(n, what);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + at_), static_cast<std::size_t>(n));
    at_ += static_cast<std::size_t>(n);
    return s;
  }

 private:
  std::span<const std::uint8_t> bytes_;
  const std::string& path_;
  std::size_t at_ = 0;
};

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {}, expected an index written by ringtrain pack", path, what));
}

}  // namespace

std::uint32_t record_crc32(std::span<const std::uint8_t> bytes, std::uint32_t crc) noexcept {
  // zlib takes a uInt length: feed large spans in pieces.
  std::size_t at = 0;
  while (at < bytes.size()) {
    const std::size_t n = std::min<std::size_t>(bytes.size() - at, 1u << 30);
    crc = static_cast<std::uint32_t>(::crc32(crc, bytes.data() + at, static_cast<uInt>(n)));
    at += n;
  }
  return crc;
}

std::string shard_index_path(const std::string& dir, const std::string& split) {
  return fmt::format("{}/{}.index", dir, split);
}

std::string shard_file_path(const std::string& dir, const std::string& split, std::uint32_t shard) {
  return fmt::format("{}/{}-{:05}.shard", dir, split, shard);
}

std::vector<std::uint8_t> ShardIndex::serialize() const {
  Out o;
  o.bytes(kIndexMagic, sizeof kIndexMagic);
  o.u32(kShardIndexVersion);
  o.u32(static_cast<std::uint32_t>(encoding));
  o.u32(channels);
  o.u32(static_cast<std::uint32_t>(class_names.size()));
  o.u32(static_cast<std::uint32_t>(shard_bytes.size()));
  o.u64(records.size());
  for (const std::string& name : class_names) {
    o.u32(static_cast<std::uint32_t>(name.size()));
    o.bytes(name.data(), name.size());
  }
  for (std::uint32_t c = 0; c < channels; ++c) o.f32(c < norm_mean.size() ? norm_mean[c] : 0.0f);
  for (std::uint32_t c = 0; c < channels; ++c) o.f32(c < norm_std.size() ? norm_std[c] : 1.0f);
  for (std::uint64_t b : shard_bytes) o.u64(b);
  for (const ShardRecord& r : records) {
    o.u32(r.shard);
    o.u64(r.offset);
    o.u32(r.bytes);
    o.u32(r.label);
    o.u32(r.crc);
    o.u32(r.width);
    o.u32(r.height);
  }
  o.u32(record_crc32(o.data));
  return std::move(o.data);
}

ShardIndex ShardIndex::parse(std::span<const std::uint8_t> bytes, const std::string& path) {
  if (bytes.size() < sizeof kIndexMagic + 4 || std::memcmp(bytes.data(), kIndexMagic, sizeof kIndexMagic) != 0)
    bad(path, "not a packed index (no RTPACKIX magic)");
  const auto body = bytes.first(bytes.size() - 4);
  const std::uint8_t* t = bytes.data() + body.size();
  const std::uint32_t stored = t[0] | (t[1] << 8) | (t[2] << 16) | (static_cast<std::uint32_t>(t[3]) << 24);
  const std::uint32_t computed = record_crc32(body);
  if (stored != computed) bad(path, fmt::format("index checksum mismatch (stored {:08x}, computed {:08x})", stored, computed));
  In in(body, path);
  in.text(sizeof kIndexMagic, "magic");
  if (const std::uint32_t v = in.u32("version"); v != kShardIndexVersion) bad(path, fmt::format("format version {}", v));
  ShardIndex ix;
  const std::uint32_t encoding = in.u32("encoding");
  if (encoding > 1) bad(path, fmt::format("record encoding {}", encoding));
  ix.encoding = static_cast<RecordEncoding>(encoding);
  ix.channels = in.u32("channels");
  if (ix.channels != 1 && ix.channels != 3) bad(path, fmt::format("{} channels", ix.channels));
  const std::uint32_t classes = in.u32("class count");
  const std::uint32_t shards = in.u32("shard count");
  const std::uint64_t records = in.u64("record count");
  if (classes < 1) bad(path, "no classes");
  in.need(static_cast<std::uint64_t>(classes) * 4, "class names");
  for (std::uint32_t k = 0; k < classes; ++k) ix.class_names.push_back(in.text(in.u32("class name size"), "class name"));
  for (std::uint32_t c = 0; c < ix.channels; ++c) ix.norm_mean.push_back(in.f32("mean"));
  for (std::uint32_t c = 0; c < ix.channels; ++c) ix.norm_std.push_back(in.f32("std"));
  in.need(static_cast<std::uint64_t>(shards) * 8, "shard sizes");
  for (std::uint32_t s = 0; s < shards; ++s) ix.shard_bytes.push_back(in.u64("shard size"));
  if (records > in.left() / kRecordEntryBytes || records * kRecordEntryBytes != in.left())
    bad(path, fmt::format("{} records in {} bytes of record table", records, in.left()));
  ix.records.resize(static_cast<std::size_t>(records));
  for (std::uint64_t i = 0; i < records; ++i) {
    ShardRecord& r = ix.records[static_cast<std::size_t>(i)];
    r.shard = in.u32("record");
    r.offset = in.u64("record");
    r.bytes = in.u32("record");
    r.label = in.u32("record");
    r.crc = in.u32("record");
    r.width = in.u32("record");
    r.height = in.u32("record");
    if (r.shard >= shards || r.offset < sizeof kShardMagic ||
        r.offset > ix.shard_bytes[r.shard] || ix.shard_bytes[r.shard] - r.offset < kRecordHeaderBytes + r.bytes)
      bad(path, fmt::format("record {} lies outside its shard {}", i, r.shard));
    if (r.label >= classes) bad(path, fmt::format("record {} has label {} of {} classes", i, r.label, classes));
    if (r.width == 0 || r.height == 0 || r.width > 65535 || r.height > 65535)
      bad(path, fmt::format("record {} is {}x{} pixels", i, r.width, r.height));
    if (ix.encoding == RecordEncoding::kRaw &&
        static_cast<std::uint64_t>(r.width) * r.height * ix.channels != r.bytes)
      bad(path, fmt::format("raw record {} holds {} bytes for {}x{}x{}", i, r.bytes, r.width, r.height, ix.channels));
  }
  return ix;
}

}  // namespace ringtrain
