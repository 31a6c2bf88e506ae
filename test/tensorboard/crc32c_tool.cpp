// Test helper for crc32c_vs_python.py: CRC-32C of slices of a file by both paths, one line
// per slice: "<offset> <length> <table crc> <hardware crc or ->".
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "tensorboard/Crc32c.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: crc32c_tool FILE\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  const std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 64; ++n) lengths.push_back(n);
  for (std::size_t n : {255, 256, 1000, 4096, 65537}) lengths.push_back(n);
  for (std::size_t offset = 0; offset < 8; ++offset) {
    for (std::size_t n : lengths) {
      if (offset + n > data.size()) continue;
      const char* p = data.data() + offset;
      std::printf("%zu %zu %08x ", offset, n, ringtrain::crc32c_table(p, n));
      if (ringtrain::crc32c_hardware_available()) {
        std::printf("%08x\n", ringtrain::crc32c_hardware(p, n));
      } else {
        std::printf("-\n");
      }
    }
  }
  return 0;
}
