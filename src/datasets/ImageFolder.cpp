// Folder listing for the ImageFolder convention and its train/validation split.
#include "datasets/ImageFolder.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "datasets/DataNotFound.h"

namespace ringtrain {
namespace fs = std::filesystem;

bool is_image_name(const std::string& filename) {
  const auto dot = filename.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = filename.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == "jpg" || ext == "jpeg" || ext == "png";
}

FolderListing list_image_folder(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw DataNotFound(fmt::format("{}: no such directory, expected a folder of class folders (<class>/<image>.jpg|png)", dir));
  FolderListing listing;
  listing.dir = dir;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_directory()) listing.class_names.push_back(entry.path().filename().string());
  std::sort(listing.class_names.begin(), listing.class_names.end());
  if (listing.class_names.empty())
    throw std::runtime_error(fmt::format("{}: no class folders, expected <class>/<image>.jpg|png beneath it", dir));
  for (std::size_t label = 0; label < listing.class_names.size(); ++label) {
    const fs::path class_dir = fs::path(dir) / listing.class_names[label];
    std::vector<std::string> files;
    for (const auto& entry : fs::recursive_directory_iterator(class_dir, fs::directory_options::follow_directory_symlink))
      if (!entry.is_directory() && is_image_name(entry.path().filename().string())) files.push_back(entry.path().string());
    if (files.empty())
      throw std::runtime_error(fmt::format("{}: class folder without images, expected .jpg, .jpeg or .png files in it",
                                           class_dir.string()));
    std::sort(files.begin(), files.end());
    for (auto& f : files) listing.files.push_back({std::move(f), static_cast<int>(label)});
  }
  return listing;
}

namespace {

void require_same_classes(const FolderListing& train, const FolderListing& val) {
  if (train.class_names == val.class_names) return;
  for (const auto& name : train.class_names)
    if (!std::binary_search(val.class_names.begin(), val.class_names.end(), name))
      throw std::runtime_error(fmt::format("{}: no class folder '{}', expected the classes of {}", val.dir, name, train.dir));
  for (const auto& name : val.class_names)
    if (!std::binary_search(train.class_names.begin(), train.class_names.end(), name))
      throw std::runtime_error(fmt::format("{}: class folder '{}' is not in {}, expected the same classes", val.dir, name, train.dir));
}

}  // namespace

FolderSplitListing list_folder_splits(const std::string& dir, double val_fraction) {
  FolderSplitListing out;
  std::error_code ec;
  const fs::path root(dir);
  if (fs::is_directory(root / "train", ec)) {
    if (val_fraction > 0.0)
      throw std::invalid_argument(fmt::format("--val-fraction: {} has train/ (and val/) already; give one or the other", dir));
    out.train = list_image_folder((root / "train").string());
    out.val = list_image_folder((root / "val").string());
    require_same_classes(out.train, out.val);
    return out;
  }
  if (!fs::is_directory(root, ec))
    throw DataNotFound(fmt::format("{}: no such directory, expected DIR/train/<class>/... and DIR/val/<class>/...", dir));
  if (!(val_fraction > 0.0 && val_fraction < 1.0))
    throw std::invalid_argument(fmt::format("--dataset folder: {} has no train/ folder; expected DIR/train and DIR/val, "
                                            "or --val-fraction F in (0, 1) to split DIR's class folders", dir));
  const FolderListing all = list_image_folder(dir);
  out.train.dir = out.val.dir = dir;
  out.train.class_names = out.val.class_names = all.class_names;
  std::size_t k = 0;
  for (std::size_t i = 0; i < all.files.size(); ++i, ++k) {
    if (i > 0 && all.files[i].label != all.files[i - 1].label) k = 0;
    const bool val = std::floor((k + 1) * val_fraction) > std::floor(k * val_fraction);
    (val ? out.val : out.train).files.push_back(all.files[i]);
  }
  if (out.train.files.empty() || out.val.files.empty())
    throw std::runtime_error(fmt::format("{}: --val-fraction {} leaves an empty split ({} training, {} validation images)", dir,
                                         val_fraction, out.train.files.size(), out.val.files.size()));
  return out;
}

}  // namespace ringtrain
