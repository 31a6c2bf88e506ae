// Little-endian 32-bit words in byte buffers: the framing of the stall channel's side sockets
// (SideSocket's frame header, StallChannel's messages), fixed on the wire whatever the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringtrain {

inline void append_le32(std::vector<std::byte>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
}

inline std::uint32_t read_le32(const std::byte* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace ringtrain
