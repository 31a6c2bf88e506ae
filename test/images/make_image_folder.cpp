// Writes image folders for the CLI tests and for trying `ringtrain ... --dataset folder`:
//   make_image_folder fashion DIR TRAIN VAL   the first TRAIN/VAL Fashion-MNIST images as PNG
//   make_image_folder photos DIR TRAIN VAL    RGB JPEGs of 4 classes, sizes 48-160, varied content
// DIR/train/<class>/*.{png,jpg} and DIR/val/<class>/...
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "datasets/ImageDataset.h"
#include "datasets/folder_test_util.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

void photos(const std::filesystem::path& dir, const char* split, int count, int salt) {
  for (int i = 0; i < count; ++i) {
    const int label = i % 4;
    const int w = 48 + (i * 37 + salt) % 113, h = 48 + (i * 53 + salt) % 97;
    auto px = ramp_image(w, h, 3, i + salt);
    // A class-coloured square, so the classes can be told apart.
    for (int y = h / 4; y < h / 2; ++y)
      for (int x = w / 4; x < w / 2; ++x) px[(static_cast<std::size_t>(y) * w + x) * 3 + static_cast<std::size_t>(label % 3)] = 255;
    write_jpeg(dir / split / fmt::format("class{}", label) / fmt::format("img{:05}.jpg", i), px, w, h, 3);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: make_image_folder fashion|photos DIR TRAIN VAL\n");
    return 2;
  }
  const std::string kind = argv[1];
  const std::filesystem::path dir = argv[2];
  const int train = std::atoi(argv[3]), val = std::atoi(argv[4]);
  if (kind == "fashion") {
    const DatasetSplits fm = load_dataset(DatasetConfig{});
    export_as_png(dynamic_cast<const ImageDataset&>(*fm.train), static_cast<std::size_t>(train), dir, "train");
    export_as_png(dynamic_cast<const ImageDataset&>(*fm.test), static_cast<std::size_t>(val), dir, "val");
  } else if (kind == "photos") {
    photos(dir, "train", train, 0);
    photos(dir, "val", val, 7);
  } else {
    std::fprintf(stderr, "make_image_folder: unknown kind '%s' (fashion or photos)\n", kind.c_str());
    return 2;
  }
  std::printf("wrote %s\n", dir.c_str());
  return 0;
}
