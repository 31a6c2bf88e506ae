// Where a training or evaluation sample is cut from its image: the random-resized crop of
// Szegedy et al. 2015 (torchvision's RandomResizedCrop, same attempts and fallback) and
// the evaluation recipe (shorter side to SIZE / 0.875, centre SIZE x SIZE), as boxes in
// source pixels, drawn from (seed, epoch, index) alone so thread count never changes them.
#pragma once

#include <cstdint>

namespace ringtrain {

struct CropBox {
  double x = 0.0;  // left edge, source pixels
  double y = 0.0;  // top edge
  double width = 0.0;
  double height = 0.0;
  bool flip = false;  // mirror the output horizontally
};

struct CropConfig {
  int size = 0;  // output SIZE x SIZE; 0: no crop (images used as they are)
  double scale_min = 0.08, scale_max = 1.0;        // fraction of the image area
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;  // width / height
  bool flip = true;  // random horizontal flip in training
  // Evaluation resizes the shorter side to size / eval_fraction (torchvision's ImageNet
  // recipe: 224 / 0.875 = 256) and takes the centre size x size.
  double eval_fraction = 0.875;
};

// The random-resized crop of an image of width x height for stream key `key` (derived
// from seed, epoch and sample index by the caller).
CropBox random_resized_crop(int width, int height, const CropConfig& config, std::uint64_t key);

// The evaluation crop: the centre size x size of the image resized so its shorter side is
// round(size / eval_fraction), as a box in source pixels.
CropBox centre_crop(int width, int height, const CropConfig& config);

}  // namespace ringtrain
