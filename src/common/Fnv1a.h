// FNV-1a, 64 bits: a stable, fast hash of short texts (configuration fingerprints compared
// across ranks, the snapshot directory's name). Not for integrity: checkpoints use CRC32.
#pragma once

#include <cstdint>
#include <string_view>

namespace ringtrain {

constexpr std::uint64_t fnv1a64(std::string_view text) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace ringtrain
