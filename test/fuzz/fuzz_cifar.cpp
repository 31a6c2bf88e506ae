// libFuzzer harness: a CIFAR-10 binary batch file (records of label + 3072 pixels), and
// every sample read back out of the dataset it builds.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <vector>

#include "FuzzFile.h"
#include "datasets/Cifar10Reader.h"
#include "datasets/ImageDataset.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = ringtrain::fuzz::as_file(data, size);
  try {
    const auto d = ringtrain::read_cifar10_batches({path}, {});
    std::vector<float> x(d->shape().numel());
    for (std::size_t i = 0; i < d->size(); ++i) {
      d->get(i, x.data());
      (void)d->label(i);
    }
  } catch (const std::exception&) {
  }
  return 0;
}
