// Writes image folders for the CLI tests, for trying `ringtrain ... --dataset folder` and for
// the folder benchmarks (scripts/bench suites tta and throughput):
//   make_image_folder fashion DIR TRAIN VAL        the first TRAIN/VAL Fashion-MNIST images as
//                                                  lossless PNG (60000 10000: all of it)
//   make_image_folder photos DIR TRAIN VAL [WxH]   RGB JPEGs of 4 classes, sizes 48-160, varied
//                                                  content; with WxH sizes W..1.2W x H..1.2H and
//                                                  grain, so files and decode cost are photo-like
// DIR/train/<class>/*.{png,jpg} and DIR/val/<class>/...
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "datasets/ImageDataset.h"
#include "datasets/folder_test_util.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

struct Size {
  int w = 0, h = 0;  // 0: the small test sizes
};

// Deterministic per-pixel grain: smooth ramps compress to almost nothing, which would make
// JPEG decoding (its Huffman stage scales with the file size) unrealistically cheap.
void add_grain(std::vector<std::uint8_t>& px, int seed) {
  std::uint32_t s = 2654435761u * static_cast<std::uint32_t>(seed + 1);
  for (auto& v : px) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    v = static_cast<std::uint8_t>(std::clamp(static_cast<int>(v) + static_cast<int>(s % 17) - 8, 0, 255));
  }
}

void photos(const std::filesystem::path& dir, const char* split, int count, int salt, Size size) {
  for (int i = 0; i < count; ++i) {
    const int label = i % 4;
    const int w = size.w ? size.w + (i * 37 + salt) % (size.w / 5 + 1) : 48 + (i * 37 + salt) % 113;
    const int h = size.h ? size.h + (i * 53 + salt) % (size.h / 5 + 1) : 48 + (i * 53 + salt) % 97;
    auto px = ramp_image(w, h, 3, i + salt);
    if (size.w) add_grain(px, i + salt);
    // A class-coloured square, so the classes can be told apart.
    for (int y = h / 4; y < h / 2; ++y)
      for (int x = w / 4; x < w / 2; ++x) px[(static_cast<std::size_t>(y) * w + x) * 3 + static_cast<std::size_t>(label % 3)] = 255;
    write_jpeg(dir / split / fmt::format("class{}", label) / fmt::format("img{:07}.jpg", i), px, w, h, 3);
  }
}

Size parse_size(const std::string& text) {
  Size s;
  if (std::sscanf(text.c_str(), "%dx%d", &s.w, &s.h) != 2 || s.w < 16 || s.h < 16 || s.w > 8192 || s.h > 8192)
    throw std::invalid_argument("size '" + text + "': expected WxH, e.g. 500x375 (16 to 8192)");
  return s;
}

int count_arg(const char* text, const char* what) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < 0 || v > 100000000)
    throw std::invalid_argument(fmt::format("{} '{}': expected a count >= 0", what, text));
  return static_cast<int>(v);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    std::fprintf(stderr, "usage: make_image_folder fashion|photos DIR TRAIN VAL [WxH (photos)]\n");
    return 2;
  }
  try {
    const std::string kind = argv[1];
    const std::filesystem::path dir = argv[2];
    const int train = count_arg(argv[3], "TRAIN"), val = count_arg(argv[4], "VAL");
    if (kind == "fashion" && argc == 5) {
      const DatasetSplits fm = load_dataset(DatasetConfig{});
      // Never past the set's end: asking for more than it has writes all of it.
      const auto& tr = dynamic_cast<const ImageDataset&>(*fm.train);
      const auto& te = dynamic_cast<const ImageDataset&>(*fm.test);
      export_as_png(tr, std::min(static_cast<std::size_t>(train), tr.size()), dir, "train");
      export_as_png(te, std::min(static_cast<std::size_t>(val), te.size()), dir, "val");
    } else if (kind == "photos") {
      const Size size = argc == 6 ? parse_size(argv[5]) : Size{};
      photos(dir, "train", train, 0, size);
      photos(dir, "val", val, 7, size);
    } else {
      std::fprintf(stderr, "make_image_folder: unknown kind '%s' (fashion DIR TRAIN VAL, or photos DIR TRAIN VAL [WxH])\n",
                   kind.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_image_folder: %s\n", e.what());
    return 1;
  }
  std::printf("wrote %s\n", argv[2]);
  return 0;
}
