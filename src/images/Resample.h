// A box of an 8-bit (H, W, C) image resampled to (C, out_h, out_w) normalised floats.
#pragma once

#include <span>

#include "images/CropBox.h"
#include "images/DecodedImage.h"

namespace ringtrain {

// Per-channel normalisation (x / 255 - mean[c]) / std[c].
struct Normalisation {
  std::span<const float> mean;  // one value per channel
  std::span<const float> std;
};

// Separable triangle filter: bilinear when enlarging, and when shrinking by s the triangle
// widens to s source pixels (PIL's BILINEAR resize, torchvision's antialias=True), so every
// covered source pixel contributes, as area averaging does; plain bilinear would sample
// 2 of every s pixels and alias at ImageNet's typical 2-8x reductions. Filter taps stop at
// the image's edges (not the box's), so a centre crop equals resize-then-crop. The box is in
// `image`'s pixels; a horizontal flip mirrors the output. Writes out_h * out_w * channels floats.
void resample_box(const DecodedImage& image, const CropBox& box, int out_w, int out_h, const Normalisation& norm,
                  float* dst);

// No resampling: (H, W, C) -> (C, H, W), normalised.
void to_planar(const DecodedImage& image, const Normalisation& norm, float* dst);

}  // namespace ringtrain
