// SVHN reader: X is decoded straight into the sample array and each (H, W) channel
// plane is transposed in place from MATLAB's column-major order to row-major CHW.
#include "datasets/SvhnReader.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "datasets/DataNotFound.h"
#include "datasets/MatFile.h"

namespace ringtrain {
namespace {

std::string dims_text(const std::vector<std::uint64_t>& dims) {
  std::string s;
  for (auto d : dims) { if (!s.empty()) s += "x"; s += std::to_string(d); }
  return s;
}

}  // namespace

std::unique_ptr<ImageDataset> read_svhn_mat(const std::string& path) {
  if (!std::filesystem::exists(path))
    throw DataNotFound(fmt::format("{}: file not found; expected train_32x32.mat and test_32x32.mat (SVHN cropped "
                                   "digits, format 2) in {}",
                                   path, std::filesystem::path(path).parent_path().string()));
  const MatFile mat(path);
  const MatVariable& x = mat.variable("X");
  const MatVariable& y = mat.variable("y");
  // X: (H, W, C, N); MATLAB drops a trailing singleton, so one image is (H, W, C).
  auto xd = x.dims;
  if (xd.size() == 3) xd.push_back(1);
  if (xd.size() != 4 || xd[2] != 3 || xd[0] == 0 || xd[1] == 0 || xd[0] > 4096 || xd[1] > 4096)
    throw std::runtime_error(
        fmt::format("{}: variable 'X' has dimensions {}, expected HxWx3xN (SVHN: 32x32x3xN)", path, dims_text(x.dims)));
  const std::uint64_t h = xd[0], w = xd[1], c = xd[2], n = xd[3];
  const std::uint64_t ny = y.dims.size() == 2 && (y.dims[0] == 1 || y.dims[1] == 1) ? y.numel() : 0;
  if (y.dims.size() != 2 || ny == 0 || (y.dims[0] != 1 && y.dims[1] != 1))
    throw std::runtime_error(fmt::format("{}: variable 'y' has dimensions {}, expected Nx1", path, dims_text(y.dims)));
  if (ny != n)
    throw std::runtime_error(fmt::format("{}: 'X' holds {} images but 'y' holds {} labels", path, n, ny));
  const std::uint64_t numel = h * w * c * n;
  if (numel > mat.max_decoded_bytes("X"))
    throw std::runtime_error(fmt::format("{}: variable 'X' ({}) cannot fit in its {}-byte element; truncated or corrupt",
                                         path, dims_text(x.dims), mat.max_decoded_bytes("X")));
  if (n > mat.max_decoded_bytes("y"))
    throw std::runtime_error(fmt::format("{}: variable 'y' ({}) cannot fit in its element; truncated or corrupt", path,
                                         dims_text(y.dims)));

  std::vector<std::uint8_t> pixels(numel), labels(n);
  mat.read_uint8("y", labels.data(), labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 1 || labels[i] > 10)
      throw std::runtime_error(
          fmt::format("{}: label {} at index {} out of range (SVHN stores digits as 1..10, 10 for 0)", path, labels[i], i));
    if (labels[i] == 10) labels[i] = 0;
  }
  mat.read_uint8("X", pixels.data(), pixels.size());
  // Each (H, W) plane is stored column-major (element (r, c) at c*H + r); CHW wants r*W + c.
  std::vector<std::uint8_t> plane(h * w);
  for (std::uint8_t* p = pixels.data(); p < pixels.data() + pixels.size(); p += h * w) {
    std::copy_n(p, h * w, plane.data());
    for (std::uint64_t col = 0; col < w; ++col)
      for (std::uint64_t row = 0; row < h; ++row) p[row * w + col] = plane[col * h + row];
  }
  return std::make_unique<ImageDataset>(
      ImageShape{static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)}, 10, std::move(pixels), std::move(labels),
      std::vector<std::string>{}, path);
}

DatasetSplits load_svhn_dataset(const std::string& dir) {
  if (!std::filesystem::is_directory(dir))
    throw DataNotFound(fmt::format("{}: directory not found; expected train_32x32.mat and test_32x32.mat (SVHN) there", dir));
  DatasetSplits splits;
  splits.train = read_svhn_mat((std::filesystem::path(dir) / "train_32x32.mat").string());
  splits.test = read_svhn_mat((std::filesystem::path(dir) / "test_32x32.mat").string());
  return splits;
}

}  // namespace ringtrain
