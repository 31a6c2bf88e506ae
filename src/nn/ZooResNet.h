// The residual networks of the zoo, written with ZooBuilder: He et al. 2015's CIFAR ResNets
// and torchvision's ImageNet ResNets.
#pragma once

#include "nn/ZooBuilder.h"

namespace ringtrain {

// He et al. 2015 §4.2: 3x3 conv 16, three stages of (depth - 2) / 6 basic blocks at 16, 32,
// 64 channels (stride 2 entering stages 2 and 3), global average pooling, linear.
void build_cifar_resnet(ZooBuilder& b, int depth, int classes);
// torchvision.models.resnet18/34 (basic blocks) and resnet50/101/152 (bottlenecks, stride on
// the 3x3): 7x7/2 conv 64, 3x3/2 max pool, four stages, global average pooling, linear.
void build_torchvision_resnet(ZooBuilder& b, int depth, int classes);
// Smallest input side each accepts: the documented floor (past it ZooBuilder checks each layer).
// check_min_side throws std::invalid_argument naming the model when the current tensor is smaller.
constexpr int kCifarResNetMinSide = 8;
constexpr int kTorchvisionMinSide = 32;
void check_min_side(ZooBuilder& b, int min_side, const char* what);

}  // namespace ringtrain
