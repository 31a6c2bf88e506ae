// IDX readers: headers are big-endian uint32s (LeCun et al., "THE MNIST DATABASE" page);
// the payload size implied by the header must equal the decoded file size exactly.
#include "datasets/IdxReader.h"

#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "datasets/ByteReader.h"
#include "datasets/DataNotFound.h"

namespace ringtrain {
namespace {

constexpr std::uint32_t kImagesMagic = 0x00000803;  // unsigned byte, 3 dimensions
constexpr std::uint32_t kLabelsMagic = 0x00000801;  // unsigned byte, 1 dimension
constexpr std::uint32_t kMaxSide = 1 << 16;

std::uint32_t big_endian(const unsigned char* p) {
  return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | std::uint32_t{p[3]};
}

void check_magic(const ByteReader& in, std::uint32_t magic, std::uint32_t expected, const char* what) {
  if (magic != expected)
    throw std::runtime_error(fmt::format("{}: wrong magic number 0x{:08x}, expected 0x{:08x} (IDX {}){}", in.path(), magic,
                                         expected, what,
                                         magic == kImagesMagic   ? "; this is an images file"
                                         : magic == kLabelsMagic ? "; this is a labels file"
                                                                 : ""));
}

// Reads the magic first, so a file of the wrong kind is named as such even when it is
// shorter than the header expected; then the rest of the header.
void read_header(ByteReader& in, unsigned char* header, std::size_t n, std::uint32_t expected, const char* what) {
  if (in.size() >= 4) {
    in.read(header, 4);
    check_magic(in, big_endian(header), expected, what);
  }
  if (in.size() < n)
    throw std::runtime_error(fmt::format("{}: too short for an IDX {} header ({} bytes needed, {})", in.path(), what, n,
                                         in.size_origin()));
  in.read(header + 4, n - 4);
}

}  // namespace

IdxImages read_idx_images(const std::string& path) {
  ByteReader in(path);
  unsigned char header[16];
  read_header(in, header, sizeof header, kImagesMagic, "images");
  const std::uint32_t count = big_endian(header + 4), rows = big_endian(header + 8), cols = big_endian(header + 12);
  if (count == 0 || rows == 0 || cols == 0 || rows > kMaxSide || cols > kMaxSide)
    throw std::runtime_error(fmt::format("{}: implausible IDX image dimensions {} x {} x {}", path, count, rows, cols));
  const std::uint64_t expected = 16 + std::uint64_t{count} * rows * cols;  // < 2^64: 32 + 16 + 16 bits
  if (expected != in.size())
    throw std::runtime_error(fmt::format("{}: header says {} images of {}x{} ({} bytes) but {}{}", path, count, rows, cols,
                                         expected, in.size_origin(),
                                         in.gzipped() ? "; the .gz file is truncated or corrupt" : ""));
  IdxImages images;
  images.count = count;
  images.rows = static_cast<int>(rows);
  images.cols = static_cast<int>(cols);
  images.pixels.resize(expected - 16);
  in.read(images.pixels.data(), images.pixels.size());
  in.finish();
  return images;
}

std::vector<std::uint8_t> read_idx_labels(const std::string& path, int classes) {
  ByteReader in(path);
  unsigned char header[8];
  read_header(in, header, sizeof header, kLabelsMagic, "labels");
  const std::uint32_t count = big_endian(header + 4);
  if (count == 0) throw std::runtime_error(fmt::format("{}: IDX labels file holds no labels", path));
  const std::uint64_t expected = 8 + std::uint64_t{count};
  if (expected != in.size())
    throw std::runtime_error(fmt::format("{}: header says {} labels ({} bytes) but {}{}", path, count, expected,
                                         in.size_origin(), in.gzipped() ? "; the .gz file is truncated or corrupt" : ""));
  std::vector<std::uint8_t> labels(count);
  in.read(labels.data(), labels.size());
  in.finish();
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (labels[i] >= classes)
      throw std::runtime_error(
          fmt::format("{}: label {} at index {} out of range (expected 0..{})", path, labels[i], i, classes - 1));
  return labels;
}

std::string find_idx_file(const std::string& dir, const std::string& base) {
  std::vector<std::string> names{base + ".gz", base};
  const auto dash = base.rfind("-idx");
  if (dash != std::string::npos) {
    std::string dotted = base;
    dotted[dash] = '.';
    names.push_back(dotted + ".gz");
    names.push_back(dotted);
  }
  for (const auto& name : names) {
    const auto path = (std::filesystem::path(dir) / name).string();
    if (std::filesystem::exists(path)) return path;
  }
  throw DataNotFound(fmt::format("{}: IDX file {}[.gz] not found (expected train-images-idx3-ubyte, "
                                 "train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, "
                                 "raw or .gz, in this directory)",
                                 (std::filesystem::path(dir) / base).string(), base));
}

std::unique_ptr<ImageDataset> load_idx_split(const std::string& images_path, const std::string& labels_path,
                                             std::vector<std::string> class_names) {
  const int classes = class_names.empty() ? 10 : static_cast<int>(class_names.size());
  auto labels = read_idx_labels(labels_path, classes);
  auto images = read_idx_images(images_path);
  if (labels.size() != images.count)
    throw std::runtime_error(fmt::format("{}: {} images but {} has {} labels", images_path, images.count, labels_path,
                                         labels.size()));
  return std::make_unique<ImageDataset>(ImageShape{1, images.rows, images.cols}, classes, std::move(images.pixels),
                                        std::move(labels), std::move(class_names),
                                        fmt::format("{} + {}", images_path, labels_path));
}

DatasetSplits load_idx_dataset(const std::string& dir, std::vector<std::string> class_names) {
  // Looked up in this order (not as call arguments, whose order is unspecified) so the
  // first missing file reported is the first one a user would check.
  const std::string train_images = find_idx_file(dir, "train-images-idx3-ubyte");
  const std::string train_labels = find_idx_file(dir, "train-labels-idx1-ubyte");
  const std::string test_images = find_idx_file(dir, "t10k-images-idx3-ubyte");
  const std::string test_labels = find_idx_file(dir, "t10k-labels-idx1-ubyte");
  DatasetSplits splits;
  splits.train = load_idx_split(train_images, train_labels, class_names);
  splits.test = load_idx_split(test_images, test_labels, std::move(class_names));
  if (splits.train->shape() != splits.test->shape())
    throw std::runtime_error(fmt::format("{}: train images are {} but test images are {}", dir, splits.train->shape().str(),
                                         splits.test->shape().str()));
  return splits;
}

}  // namespace ringtrain
