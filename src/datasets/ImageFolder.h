// The ImageFolder convention (torchvision's): DIR/<class>/.../<image>, classes the sorted
// names of DIR's sub-folders, files found recursively in sorted path order, and the
// train/validation split of a folder tree (DIR/train and DIR/val, or a fraction of one tree).
#pragma once

#include <string>
#include <vector>

namespace ringtrain {

struct FolderFile {
  std::string path;
  int label = 0;
};

struct FolderListing {
  std::string dir;
  std::vector<std::string> class_names;  // sorted
  std::vector<FolderFile> files;         // by class, then sorted path within the class
};

struct FolderSplitListing {
  FolderListing train;
  FolderListing val;
};

// .jpg .jpeg .png, any case.
bool is_image_name(const std::string& filename);

// Lists dir. Throws DataNotFound if dir is missing; std::runtime_error naming the folder
// for a tree without class folders or a class folder without images.
FolderListing list_image_folder(const std::string& dir);

// dir/train and dir/val when dir/train exists (the same classes in both, or an error naming
// the difference); otherwise, with val_fraction in (0, 1), one tree split per class:
// sorted file k of a class is validation when floor((k + 1) f) > floor(k f), an even,
// deterministic spread of round-down(n f) files. Throws std::invalid_argument when neither.
FolderSplitListing list_folder_splits(const std::string& dir, double val_fraction);

}  // namespace ringtrain
