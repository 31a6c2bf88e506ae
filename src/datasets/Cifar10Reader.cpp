// CIFAR-10 binary reader: every record is copied straight into the (N, 3, 32, 32) array;
// the layout of the file's image bytes is already CHW.
#include "datasets/Cifar10Reader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "datasets/ByteReader.h"
#include "datasets/DataNotFound.h"

namespace ringtrain {
namespace {

constexpr std::size_t kImageBytes = kCifarRecordBytes - 1;
const char* const kExpected = "data_batch_1.bin .. data_batch_5.bin and test_batch.bin (CIFAR-10 binary version)";

}  // namespace

std::string cifar10_batches_dir(const std::string& dir) {
  const auto sub = std::filesystem::path(dir) / "cifar-10-batches-bin";
  return std::filesystem::is_directory(sub) ? sub.string() : dir;
}

std::unique_ptr<ImageDataset> read_cifar10_batches(const std::vector<std::string>& paths,
                                                   std::vector<std::string> class_names) {
  // Each file's record count is taken once, before allocating, and only that many are read:
  // a file that grew in between cannot write past the arrays sized from it.
  std::uint64_t records = 0;
  std::vector<std::uint64_t> file_records;
  for (const auto& path : paths) {
    if (!std::filesystem::exists(path))
      throw DataNotFound(fmt::format("{}: file not found; expected {} in {}", path, kExpected,
                                     std::filesystem::path(path).parent_path().string()));
    const std::uint64_t size = file_size_checked(path);
    if (size == 0 || size % kCifarRecordBytes != 0)
      throw std::runtime_error(fmt::format("{}: size {} is not a whole number of {}-byte CIFAR-10 records "
                                           "(1 label byte + 3x32x32 pixels); wrong or truncated file",
                                           path, size, kCifarRecordBytes));
    file_records.push_back(size / kCifarRecordBytes);
    records += file_records.back();
  }
  std::vector<std::uint8_t> pixels(records * kImageBytes), labels(records);
  // Read up to 1024 records (3 MB) at a time, but never allocate more than the files hold:
  // a fixed 3 MB buffer, zeroed on every call, made up most of the time of reading a
  // small file (and held the CIFAR fuzzer to ~70 inputs/s).
  constexpr std::uint64_t kChunkRecords = 1024;
  std::vector<unsigned char> chunk(static_cast<std::size_t>(std::min(kChunkRecords, records)) * kCifarRecordBytes);
  std::size_t n = 0;
  for (std::size_t f = 0; f < paths.size(); ++f) {
    const std::string& path = paths[f];
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(fmt::format("{}: cannot open for reading", path));
    for (std::uint64_t done = 0; done < file_records[f];) {
      const std::size_t take = static_cast<std::size_t>(std::min(kChunkRecords, file_records[f] - done));
      in.read(reinterpret_cast<char*>(chunk.data()), static_cast<std::streamsize>(take * kCifarRecordBytes));
      if (static_cast<std::size_t>(in.gcount()) != take * kCifarRecordBytes)
        throw std::runtime_error(fmt::format("{}: truncated while reading record {}", path, done));
      for (std::size_t r = 0; r < take; ++r, ++n) {
        const unsigned char* rec = chunk.data() + r * kCifarRecordBytes;
        if (rec[0] >= 10)
          throw std::runtime_error(
              fmt::format("{}: label {} in record {} out of range (expected 0..9)", path, rec[0], done + r));
        labels[n] = rec[0];
        std::copy_n(rec + 1, kImageBytes, pixels.data() + n * kImageBytes);
      }
      done += take;
    }
  }
  std::string source;
  for (const auto& p : paths) { if (!source.empty()) source += " + "; source += p; }
  return std::make_unique<ImageDataset>(ImageShape{3, 32, 32}, 10, std::move(pixels), std::move(labels),
                                        std::move(class_names), std::move(source));
}

std::vector<std::string> read_cifar10_class_names(const std::string& batches_dir) {
  const auto path = (std::filesystem::path(batches_dir) / "batches.meta.txt").string();
  if (!std::filesystem::exists(path))
    return {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
  if (file_size_checked(path) > (1 << 16))
    throw std::runtime_error(fmt::format("{}: too large for a class-name list", path));
  std::ifstream in(path);
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (!line.empty()) names.push_back(line);
  }
  if (names.size() != 10)
    throw std::runtime_error(fmt::format("{}: {} class names, expected 10 (one per line)", path, names.size()));
  return names;
}

DatasetSplits load_cifar10_dataset(const std::string& dir) {
  const std::string batches = cifar10_batches_dir(dir);
  if (!std::filesystem::is_directory(batches))
    throw DataNotFound(fmt::format("{}: directory not found; expected {} there or in {}/cifar-10-batches-bin", dir,
                                   kExpected, dir));
  auto file = [&](const std::string& name) { return (std::filesystem::path(batches) / name).string(); };
  const auto names = read_cifar10_class_names(batches);
  DatasetSplits splits;
  std::vector<std::string> train_files;
  for (int b = 1; b <= 5; ++b) train_files.push_back(file(fmt::format("data_batch_{}.bin", b)));
  splits.train = read_cifar10_batches(train_files, names);
  splits.test = read_cifar10_batches({file("test_batch.bin")}, names);
  return splits;
}

}  // namespace ringtrain
