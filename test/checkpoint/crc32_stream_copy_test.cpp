// checkpoint_crc32 against zlib's crc32, and the streaming copies that fill a snapshot: the
// checksums and bytes every checkpoint and RAM snapshot is made of.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include <zlib.h>

#include "checkpoint/Crc32.h"
#include "checkpoint/StreamCopy.h"

using namespace ringtrain;

TEST_CASE("checkpoint_crc32 (libdeflate) gives zlib's crc32 bit for bit: odd lengths, offsets, continued") {
  std::mt19937_64 rng(23);
  std::vector<std::byte> buffer((1 << 20) + 977);
  for (std::byte& b : buffer) b = static_cast<std::byte>(rng());
  const auto zlib_crc = [](std::span<const std::byte> bytes, uLong crc = 0) {
    return static_cast<std::uint32_t>(crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
  };
  CHECK(checkpoint_crc32({}) == 0u);
  const char* check = "123456789";
  CHECK(checkpoint_crc32(std::as_bytes(std::span(check, 9))) == 0xCBF43926u);
  for (int i = 0; i < 200; ++i) {
    // Lengths from 1 byte to past a megabyte, odd or not, at unaligned offsets.
    const std::size_t length = i < 100 ? static_cast<std::size_t>(i) * 2 + 1 : rng() % (buffer.size() - 64);
    const std::size_t offset = rng() % (buffer.size() - length + 1);
    const auto bytes = std::span<const std::byte>(buffer).subspan(offset, length);
    INFO("length " << length << " offset " << offset);
    CHECK(checkpoint_crc32(bytes) == zlib_crc(bytes));
    // Continued from a first piece, as zlib's crc32(crc, ...) is.
    const std::size_t cut = length / 3;
    CHECK(checkpoint_crc32(bytes.subspan(cut), checkpoint_crc32(bytes.first(cut))) == zlib_crc(bytes));
  }
}

TEST_CASE("checkpoint_crc32's 512-bit fold gives zlib's crc32 bit for bit: every length around its blocks, offsets, continued") {
  if (!checkpoint_crc32_fold_available()) {
    WARN("this CPU has no AVX-512 with VPCLMULQDQ: checkpoint_crc32 is libdeflate's alone, the fold is not tested");
    return;
  }
  std::mt19937_64 rng(29);
  std::vector<std::byte> buffer((3 << 20) + 333);
  for (std::byte& b : buffer) b = static_cast<std::byte>(rng());
  const auto zlib_crc = [](std::span<const std::byte> bytes, uLong crc = 0) {
    return static_cast<std::uint32_t>(crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
  };
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 2100; ++n) lengths.push_back(n);  // below, at and past 1 to 8 blocks of 256
  for (int i = 0; i < 40; ++i) lengths.push_back(rng() % (buffer.size() - 64));
  lengths.push_back(buffer.size() - 64);
  int wrong = 0;
  for (const std::size_t length : lengths) {
    const std::size_t offset = rng() % 64;
    const auto bytes = std::span<const std::byte>(buffer).subspan(offset, length);
    const auto start = static_cast<std::uint32_t>(rng());
    // All-ones data too: a register xored into the first bytes must not cancel out.
    if (checkpoint_crc32_fold(bytes, start) != zlib_crc(bytes, start)) ++wrong;
    if (checkpoint_crc32(bytes) != zlib_crc(bytes)) ++wrong;
  }
  CHECK(wrong == 0);
  const std::vector<std::byte> ones(4096 + 7, std::byte{0xff});
  CHECK(checkpoint_crc32_fold(ones) == zlib_crc(ones));
  CHECK(checkpoint_crc32_fold(ones, 0xffffffffu) == zlib_crc(ones, 0xffffffffu));
  const auto all = std::span<const std::byte>(buffer);
  CHECK(checkpoint_crc32_fold(all.subspan(1000), checkpoint_crc32_fold(all.first(1000))) == zlib_crc(all));
}

TEST_CASE("stream_copy and stream_zero write exactly their range at any alignment and length") {
  std::mt19937_64 rng(31);
  std::vector<std::byte> src(4096);
  for (std::byte& b : src) b = static_cast<std::byte>(rng() | 1);  // no zero bytes
  for (std::size_t at = 0; at < 40; ++at) {
    for (const std::size_t length : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17},
                                     std::size_t{63}, std::size_t{64}, std::size_t{65}, std::size_t{1000}, std::size_t{3001}}) {
      INFO("at " << at << " length " << length);
      std::vector<std::byte> dst(3100, std::byte{0x5a});
      stream_copy(dst.data() + at, src.data() + 7, length);
      stream_fence();
      CHECK(std::memcmp(dst.data() + at, src.data() + 7, length) == 0);
      CHECK(std::count(dst.begin(), dst.begin() + static_cast<std::ptrdiff_t>(at), std::byte{0x5a}) == static_cast<std::ptrdiff_t>(at));
      CHECK(std::count(dst.begin() + static_cast<std::ptrdiff_t>(at + length), dst.end(), std::byte{0x5a}) ==
            static_cast<std::ptrdiff_t>(dst.size() - at - length));
      stream_zero(dst.data() + at, length);
      stream_fence();
      CHECK(std::count(dst.begin(), dst.end(), std::byte{0}) == static_cast<std::ptrdiff_t>(length));
      CHECK(std::count(dst.begin() + static_cast<std::ptrdiff_t>(at), dst.begin() + static_cast<std::ptrdiff_t>(at + length),
                       std::byte{0}) == static_cast<std::ptrdiff_t>(length));
    }
  }
}
