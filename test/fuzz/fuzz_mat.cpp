// libFuzzer harness: MAT-file v5 (SVHN's format): the index of variables, then each
// variable decoded to uint8 when its size is modest, then the SVHN reader on the file.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <vector>

#include "FuzzFile.h"
#include "datasets/MatFile.h"
#include "datasets/SvhnReader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = ringtrain::fuzz::as_file(data, size);
  try {
    const ringtrain::MatFile mat(path);
    for (const auto& v : mat.variables()) {
      // The reader checks numel against the stored bytes itself; the bound here only keeps
      // one input from allocating gigabytes.
      if (v.numel() > (1u << 20)) continue;
      std::vector<std::uint8_t> out(v.numel());
      try {
        mat.read_uint8(v.name, out.data(), out.size());
      } catch (const std::exception&) {
      }
    }
  } catch (const std::exception&) {
  }
  try {
    (void)ringtrain::read_svhn_mat(path);
  } catch (const std::exception&) {
  }
  return 0;
}
