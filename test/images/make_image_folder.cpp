// Writes image folders for the CLI tests, for trying `ringtrain ... --dataset folder` and for
// the folder benchmarks (scripts/bench suites tta and throughput):
//   make_image_folder fashion DIR TRAIN VAL        the first TRAIN/VAL Fashion-MNIST images as
//                                                  lossless PNG (60000 10000: all of it)
//   make_image_folder photos DIR TRAIN VAL [WxH]   RGB JPEGs of 4 classes, sizes 48-160, varied
//                                                  content; with WxH sizes W..1.2W x H..1.2H and
//                                                  grain, so files and decode cost are photo-like
//   make_image_folder real DIR TRAIN VAL WxH PHOTO...
//                                                  one class per photograph (named after its
//                                                  file): crops of 50-100% of its area at
//                                                  W..1.2W x H..1.2H (portrait one in four),
//                                                  mirrored half the time, JPEG quality 90
// DIR/train/<class>/*.{png,jpg} and DIR/val/<class>/...
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "datasets/ImageDataset.h"
#include "images/CropBox.h"
#include "images/ImageDecoder.h"
#include "images/Resample.h"
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

// Real photographs' content (what the entropy decoder and the resampler see in a collection
// of photos) at ImageNet-like sizes: each output a different crop of one of a few sources.
void real(const std::filesystem::path& dir, const char* split, int count, int salt, Size size,
          const std::vector<std::filesystem::path>& sources) {
  std::vector<DecodedImage> images;
  for (const auto& src : sources) images.push_back(decode_image(read_image_file(src.string()), src.string(), {}));
  const float mean[3] = {0.0f, 0.0f, 0.0f}, std[3] = {1.0f / 255, 1.0f / 255, 1.0f / 255};  // floats 0..255
  std::vector<float> planar;
  std::vector<std::uint8_t> px;
  for (int i = 0; i < count; ++i) {
    const int label = i % static_cast<int>(sources.size());
    int w = size.w + (i * 37 + salt) % (size.w / 5 + 1), h = size.h + (i * 53 + salt) % (size.h / 5 + 1);
    if ((i / static_cast<int>(sources.size()) + salt) % 4 == 3) std::swap(w, h);
    CropConfig crop;
    crop.size = 1;
    crop.scale_min = 0.5;
    crop.ratio_min = crop.ratio_max = static_cast<double>(w) / h;
    const DecodedImage& image = images[static_cast<std::size_t>(label)];
    const CropBox box = random_resized_crop(image.width, image.height, crop, 0x9e3779b97f4a7c15ull * (i + 1) + salt);
    planar.resize(static_cast<std::size_t>(w) * h * 3);
    resample_box(image, box, w, h, {mean, std}, planar.data());
    px.resize(planar.size());
    const std::size_t plane = static_cast<std::size_t>(w) * h;
    for (std::size_t p = 0; p < plane; ++p)
      for (std::size_t c = 0; c < 3; ++c)
        px[p * 3 + c] = static_cast<std::uint8_t>(std::clamp(std::lround(planar[c * plane + p]), 0L, 255L));
    write_jpeg(dir / split / sources[static_cast<std::size_t>(label)].stem() / fmt::format("img{:07}.jpg", i), px, w, h, 3,
               90);
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
  if (argc < 5 || (argc > 6 && std::string(argv[1]) != "real")) {
    std::fprintf(stderr, "usage: make_image_folder fashion|photos|real DIR TRAIN VAL [WxH (photos, real)] [PHOTO... (real)]\n");
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
    } else if (kind == "real") {
      if (argc < 7) throw std::invalid_argument("real: expected WxH and at least one PHOTO after TRAIN VAL");
      const std::vector<std::filesystem::path> sources(argv + 6, argv + argc);
      real(dir, "train", train, 0, parse_size(argv[5]), sources);
      real(dir, "val", val, 7, parse_size(argv[5]), sources);
    } else {
      std::fprintf(stderr, "make_image_folder: unknown kind '%s' (fashion DIR TRAIN VAL, photos DIR TRAIN VAL [WxH], "
                   "or real DIR TRAIN VAL WxH PHOTO...)\n",
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
