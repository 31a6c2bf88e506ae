// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord framing.
// Debian 12 packages no C/C++ library for it, so this is a small one: the SSE4.2 crc32
// instruction where the CPU has it, a byte-at-a-time table otherwise.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringtrain {

// CRC-32C of data, continuing from crc (0 to start); crc32c("123456789") == 0xE3069283.
std::uint32_t crc32c(const void* data, std::size_t size, std::uint32_t crc = 0) noexcept;

// The two implementations behind crc32c(), exposed so tests can compare them.
std::uint32_t crc32c_table(const void* data, std::size_t size, std::uint32_t crc = 0) noexcept;
bool crc32c_hardware_available() noexcept;
// Only call when crc32c_hardware_available().
std::uint32_t crc32c_hardware(const void* data, std::size_t size, std::uint32_t crc = 0) noexcept;

// TFRecord's masked CRC (tensorflow/core/lib/hash/crc32c.h): rotated right by 15 bits plus a
// constant, so a CRC stored inside checksummed data does not checksum to something trivial.
constexpr std::uint32_t mask_crc32c(std::uint32_t crc) noexcept {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace ringtrain
