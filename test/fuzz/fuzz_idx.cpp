// libFuzzer harness: IDX image and label files (raw or gzip), as fashion-mnist ships them.
// Throwing std::exception is the reader's answer to bad input; anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <exception>

#include "FuzzFile.h"
#include "datasets/IdxReader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = ringtrain::fuzz::as_file(data, size);
  try {
    (void)ringtrain::read_idx_images(path);
  } catch (const std::exception&) {
  }
  try {
    (void)ringtrain::read_idx_labels(path);
  } catch (const std::exception&) {
  }
  return 0;
}
