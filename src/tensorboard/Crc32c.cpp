// CRC-32C: a 256-entry table and the SSE4.2 crc32 instruction, picked at run time.
#include "tensorboard/Crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define RINGTRAIN_CRC32C_X86 1
#endif

namespace ringtrain {
namespace {

constexpr std::uint32_t kPolynomial = 0x82F63B78u;  // 0x1EDC6F41 bit-reversed

constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ kPolynomial : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<std::uint32_t, 256> kTable = make_table();

}  // namespace

std::uint32_t crc32c_table(const void* data, std::size_t size, std::uint32_t crc) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (std::size_t i = 0; i < size; ++i) crc = kTable[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
  return ~crc;
}

#ifdef RINGTRAIN_CRC32C_X86

bool crc32c_hardware_available() noexcept { return __builtin_cpu_supports("sse4.2"); }

// The target attribute lets this one function use the instruction whatever -march the
// build chose; crc32c() only calls it after the CPU check.
__attribute__((target("sse4.2"))) std::uint32_t crc32c_hardware(const void* data, std::size_t size,
                                                                 std::uint32_t crc) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t c = ~crc;
#if defined(__x86_64__)
  for (; size >= 8; size -= 8, p += 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);  // unaligned load without undefined behaviour
    c = _mm_crc32_u64(c, word);
  }
#endif
  auto c32 = static_cast<std::uint32_t>(c);
  for (; size > 0; --size, ++p) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}

#else

bool crc32c_hardware_available() noexcept { return false; }
std::uint32_t crc32c_hardware(const void* data, std::size_t size, std::uint32_t crc) noexcept {
  return crc32c_table(data, size, crc);
}

#endif

std::uint32_t crc32c(const void* data, std::size_t size, std::uint32_t crc) noexcept {
  static const bool hardware = crc32c_hardware_available();
  return hardware ? crc32c_hardware(data, size, crc) : crc32c_table(data, size, crc);
}

}  // namespace ringtrain
