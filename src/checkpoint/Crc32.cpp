// Checkpoint CRC32s through libdeflate (Crc32.h).
#include "checkpoint/Crc32.h"

#include <libdeflate.h>

namespace ringtrain {

std::uint32_t checkpoint_crc32(std::span<const std::byte> bytes, std::uint32_t crc) noexcept {
  // size_t length: no pieces needed for buffers past 4 GB (zlib's crc32 takes a uInt).
  return libdeflate_crc32(crc, bytes.data(), bytes.size());
}

}  // namespace ringtrain
