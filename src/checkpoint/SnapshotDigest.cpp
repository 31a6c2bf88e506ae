// A node's summary of its own snapshot of a step, for the previous node (SnapshotDigest.h).
#include "checkpoint/SnapshotDigest.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "checkpoint/Crc32.h"

namespace ringtrain {
namespace {

template <typename T>
void put(std::byte*& at, T value) {
  std::memcpy(at, &value, sizeof value);
  at += sizeof value;
}

template <typename T>
T take(const std::byte*& at) {
  T value{};
  std::memcpy(&value, at, sizeof value);
  at += sizeof value;
  return value;
}

}  // namespace

std::array<std::byte, SnapshotDigest::kBytes> SnapshotDigest::encode() const noexcept {
  std::array<std::byte, kBytes> out{};
  std::byte* at = out.data();
  put<std::int64_t>(at, step);
  put<std::uint64_t>(at, held ? 1 : 0);
  put<std::uint64_t>(at, state_bytes);
  for (const std::uint32_t c : crc) put<std::uint32_t>(at, c);
  return out;
}

SnapshotDigest SnapshotDigest::decode(std::span<const std::byte> bytes) {
  if (bytes.size() != kBytes) {
    throw std::runtime_error(fmt::format("snapshot digest of {} bytes, expected {}", bytes.size(), kBytes));
  }
  SnapshotDigest d;
  const std::byte* at = bytes.data();
  d.step = take<std::int64_t>(at);
  d.held = take<std::uint64_t>(at) != 0;
  d.state_bytes = take<std::uint64_t>(at);
  for (std::uint32_t& c : d.crc) c = take<std::uint32_t>(at);
  return d;
}

std::uint32_t state_meta_crc(const Json& meta) {
  Json kept = Json::object();
  for (const auto& [key, value] : meta.as_object()) {
    const bool per_node = std::any_of(kPerNodeMetaKeys.begin(), kPerNodeMetaKeys.end(),
                                      [&key = key](const char* k) { return key == k; });
    if (!per_node) kept.set(key, value);
  }
  const std::string text = kept.dump();
  return checkpoint_crc32(std::as_bytes(std::span(text.data(), text.size())));
}

}  // namespace ringtrain
