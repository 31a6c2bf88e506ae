// MobileNetV2 (Sandler et al. 2018) as torchvision.models.mobilenet_v2 lays it out, written
// with ZooBuilder.
#pragma once

#include "nn/ZooBuilder.h"

namespace ringtrain {

// Width 1.0: 3x3/2 conv 32, inverted residual blocks (1x1 expand, 3x3 depthwise, 1x1 linear
// project; a residual Add where stride 1 keeps the channels), 1x1 conv 1280, ReLU6 throughout,
// global average pooling, dropout 0.2, linear. 3,504,872 parameters at 1000 classes.
void build_mobilenet_v2(ZooBuilder& b, int classes);

}  // namespace ringtrain
