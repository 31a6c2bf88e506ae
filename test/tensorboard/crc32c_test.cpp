// CRC-32C against published vectors (RFC 3720 B.4, the "123456789" check value), the
// hardware path against the table path, and TFRecord framing's layout.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tensorboard/Crc32c.h"
#include "tensorboard/EventFile.h"

using namespace ringtrain;

namespace {

struct Vector {
  std::vector<unsigned char> data;
  std::uint32_t crc;
};

std::vector<Vector> known_vectors() {
  std::vector<unsigned char> ascending(32), descending(32);
  std::iota(ascending.begin(), ascending.end(), 0);
  for (int i = 0; i < 32; ++i) descending[static_cast<std::size_t>(i)] = static_cast<unsigned char>(31 - i);
  const std::string check = "123456789";
  return {{std::vector<unsigned char>(32, 0x00), 0x8A9136AAu},
          {std::vector<unsigned char>(32, 0xFF), 0x62A8AB43u},
          {ascending, 0x46DD794Eu},
          {descending, 0x113FDB5Cu},
          {std::vector<unsigned char>(check.begin(), check.end()), 0xE3069283u},
          {{}, 0x00000000u}};
}

}  // namespace

TEST_CASE("crc32c matches the published vectors on every path") {
  for (const auto& v : known_vectors()) {
    CAPTURE(v.data.size(), v.crc);
    CHECK(crc32c(v.data.data(), v.data.size()) == v.crc);
    CHECK(crc32c_table(v.data.data(), v.data.size()) == v.crc);
    if (crc32c_hardware_available()) CHECK(crc32c_hardware(v.data.data(), v.data.size()) == v.crc);
  }
}

TEST_CASE("crc32c hardware and table paths agree at every length and alignment") {
  if (!crc32c_hardware_available()) {
    WARN("no SSE4.2 on this CPU: the table path is the only one, nothing to compare");
    return;
  }
  std::mt19937 rng(7);
  std::vector<unsigned char> buf(5000);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  for (std::size_t offset = 0; offset < 8; ++offset) {
    for (std::size_t len : {0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4096, 4991}) {
      const std::uint32_t table = crc32c_table(buf.data() + offset, len);
      if (crc32c_hardware_available()) REQUIRE(crc32c_hardware(buf.data() + offset, len) == table);
      REQUIRE(crc32c(buf.data() + offset, len) == table);
    }
  }
}

TEST_CASE("crc32c continues across pieces") {
  const std::string text = "The quick brown fox jumps over the lazy dog";
  const std::uint32_t whole = crc32c(text.data(), text.size());
  for (std::size_t cut = 0; cut <= text.size(); cut += 5) {
    const std::uint32_t first = crc32c(text.data(), cut);
    CHECK(crc32c(text.data() + cut, text.size() - cut, first) == whole);
    CHECK(crc32c_table(text.data() + cut, text.size() - cut, crc32c_table(text.data(), cut)) == whole);
  }
}

TEST_CASE("TFRecord frame: length, masked CRC of the length, data, masked CRC of the data") {
  const std::string data = "event bytes";
  const std::string f = EventFile::frame(data);
  REQUIRE(f.size() == 8 + 4 + data.size() + 4);
  std::uint64_t length = 0;
  std::memcpy(&length, f.data(), 8);
  CHECK(length == data.size());
  std::uint32_t length_crc = 0, data_crc = 0;
  std::memcpy(&length_crc, f.data() + 8, 4);
  std::memcpy(&data_crc, f.data() + 12 + data.size(), 4);
  CHECK(length_crc == mask_crc32c(crc32c(f.data(), 8)));
  CHECK(f.substr(12, data.size()) == data);
  CHECK(data_crc == mask_crc32c(crc32c(data.data(), data.size())));
  // The mask is a rotation by 15 bits plus 0xa282ead8 (mod 2^32).
  CHECK(mask_crc32c(0) == 0xa282ead8u);
  CHECK(mask_crc32c(1u << 15) == 1u + 0xa282ead8u);
}
