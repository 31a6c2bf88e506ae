// The CRC32 of checkpoint and snapshot sections: zlib's CRC-32 (the polynomial of gzip and
// PNG, crc32("123456789") == 0xCBF43926), computed with libdeflate's libdeflate_crc32, which
// folds with PCLMULQDQ where the CPU has it: about 2x zlib 1.2.13's crc32 on this project's
// machines (12 MB: 1.0 ms against 2.3 ms), the bulk of a RAM snapshot's thread time for
// larger models. Same values bit for bit, so files written before read as they did.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ringtrain {

// CRC32 of bytes, continuing from crc (0 to start), as zlib's crc32(crc, bytes, size).
std::uint32_t checkpoint_crc32(std::span<const std::byte> bytes, std::uint32_t crc = 0) noexcept;
// The CRC32 of a ++ b from crc_a, crc_b and b's size (zlib's crc32_combine).
std::uint32_t checkpoint_crc32_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::size_t b_bytes) noexcept;

}  // namespace ringtrain
