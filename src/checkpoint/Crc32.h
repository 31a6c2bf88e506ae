// The CRC32 of checkpoint and snapshot sections: zlib's CRC-32 (the polynomial of gzip and
// PNG, crc32("123456789") == 0xCBF43926). libdeflate's libdeflate_crc32 (1.14, 128-bit
// PCLMULQDQ folds) is about 2x zlib 1.2.13's crc32 on this project's machines (12 MB: 1.0 ms
// against 2.3 ms), and where the CPU has AVX-512 and VPCLMULQDQ a fold of 512-bit lanes here
// is 3-4x libdeflate (12 MB: 0.25-0.33 ms against 1.0 ms, in cache or not): for mlp, what a RAM
// snapshot's capture in the optimizer update spends on the CRC of its 12 MB. Same values bit
// for bit either way, so files written before read as they did.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ringtrain {

// CRC32 of bytes, continuing from crc (0 to start), as zlib's crc32(crc, bytes, size).
std::uint32_t checkpoint_crc32(std::span<const std::byte> bytes, std::uint32_t crc = 0) noexcept;
// The two implementations behind checkpoint_crc32(), exposed so tests can compare them:
// libdeflate's, and a fold with 512-bit carry-less multiplies (AVX-512 and VPCLMULQDQ),
// which checkpoint_crc32() takes for 1 KiB and more where the CPU has it. Only call
// checkpoint_crc32_fold() when checkpoint_crc32_fold_available().
std::uint32_t checkpoint_crc32_libdeflate(std::span<const std::byte> bytes, std::uint32_t crc = 0) noexcept;
bool checkpoint_crc32_fold_available() noexcept;
std::uint32_t checkpoint_crc32_fold(std::span<const std::byte> bytes, std::uint32_t crc = 0) noexcept;
// The CRC32 of a ++ b from crc_a, crc_b and b's size (zlib's crc32_combine).
std::uint32_t checkpoint_crc32_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::size_t b_bytes) noexcept;

}  // namespace ringtrain
