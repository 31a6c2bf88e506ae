// The .npy writer behind `eval --logits` (NumPy's format, version 1.0).
#include "run/NpyFile.h"

#include <bit>
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace ringtrain {

void write_npy(const std::filesystem::path& path, std::size_t rows, std::size_t cols, std::span<const float> data) {
  static_assert(std::endian::native == std::endian::little, "the .npy header says '<f4'");
  if (data.size() != rows * cols)
    throw std::invalid_argument(fmt::format("write_npy: {} floats for a {} x {} matrix", data.size(), rows, cols));
  std::string header = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}", rows, cols);
  // magic (6) + version (2) + length (2) + header + '\n': a multiple of 64, as NumPy aligns it.
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  const auto length = static_cast<std::uint16_t>(header.size());
  std::string prefix = "\x93NUMPY";
  prefix += '\x01';
  prefix += '\x00';
  prefix += static_cast<char>(length & 0xff);
  prefix += static_cast<char>(length >> 8);

  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << prefix << header;
    f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size_bytes()));
    if (!f.flush()) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw std::runtime_error(fmt::format("{}: cannot write the .npy file", path.string()));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw std::runtime_error(fmt::format("{}: cannot write the .npy file ({})", path.string(), ec.message()));
  }
}

}  // namespace ringtrain
