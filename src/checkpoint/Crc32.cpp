// Checkpoint CRC32s through libdeflate (Crc32.h).
#include "checkpoint/Crc32.h"

#include <libdeflate.h>
#include <zlib.h>

namespace ringtrain {

std::uint32_t checkpoint_crc32(std::span<const std::byte> bytes, std::uint32_t crc) noexcept {
  // size_t length: no pieces needed for buffers past 4 GB (zlib's crc32 takes a uInt).
  return libdeflate_crc32(crc, bytes.data(), bytes.size());
}

std::uint32_t checkpoint_crc32_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::size_t b_bytes) noexcept {
  return static_cast<std::uint32_t>(::crc32_combine(crc_a, crc_b, static_cast<z_off_t>(b_bytes)));
}

}  // namespace ringtrain
