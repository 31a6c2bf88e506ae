// ResNet blocks as graph nodes: the residual sum is an Add with the ReLU fused into it.
#include "nn/ZooResNet.h"

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace ringtrain {
namespace {

// Shortcut of a block entering with `in` and leaving with `planes` channels at `stride`:
// identity when the shapes agree, else option B of He et al. (1x1 convolution + BN), which
// is also torchvision's downsample.
std::string shortcut(ZooBuilder& b, const std::string& in, int planes, int stride) {
  const std::string main = b.current();
  b.at(in);
  if (stride == 1 && b.dims()[1] == planes) {
    b.at(main);
    return in;
  }
  b.conv(planes, 1, stride, 0, false).bn();
  const std::string projected = b.current();
  b.at(main);
  return projected;
}

// conv3x3(stride)-BN-ReLU-conv3x3-BN, + shortcut, ReLU.
void basic_block(ZooBuilder& b, int planes, int stride) {
  const std::string in = b.current();
  b.conv(planes, 3, stride, 1, false).bn().relu().conv(planes, 3, 1, 1, false).bn();
  const std::string main = b.current();
  const std::string skip = shortcut(b, in, planes, stride);
  b.add({main, skip}, true);
}

// conv1x1-BN-ReLU-conv3x3(stride)-BN-ReLU-conv1x1(4 planes)-BN, + shortcut, ReLU.
void bottleneck(ZooBuilder& b, int planes, int stride) {
  const std::string in = b.current();
  b.conv(planes, 1, 1, 0, false).bn().relu().conv(planes, 3, stride, 1, false).bn().relu();
  b.conv(4 * planes, 1, 1, 0, false).bn();
  const std::string main = b.current();
  const std::string skip = shortcut(b, in, 4 * planes, stride);
  b.add({main, skip}, true);
}

}  // namespace

void check_min_side(ZooBuilder& b, int min_side, const char* what) {
  const Dims& d = b.dims();
  if (d[2] < min_side || d[3] < min_side)
    throw std::invalid_argument(
        fmt::format("model {}: {} takes inputs of at least {}x{}, got {}x{}", b.model(), what, min_side, min_side,
                    d[2], d[3]));
}

void build_cifar_resnet(ZooBuilder& b, int depth, int classes) {
  if (depth < 8 || (depth - 2) % 6 != 0)
    throw std::invalid_argument(fmt::format("CIFAR ResNet depth must be 6n + 2, got {}", depth));
  check_min_side(b, kCifarResNetMinSide, "a CIFAR ResNet");
  const int n = (depth - 2) / 6;
  b.conv(16, 3, 1, 1, false).bn().relu();
  for (const int planes : {16, 32, 64})
    for (int i = 0; i < n; ++i) basic_block(b, planes, i == 0 && planes != 16 ? 2 : 1);
  b.global_avgpool().linear(classes);
}

void build_torchvision_resnet(ZooBuilder& b, int depth, int classes) {
  std::vector<int> blocks;
  bool bottlenecks = depth >= 50;
  switch (depth) {
    case 18: blocks = {2, 2, 2, 2}; break;
    case 34: blocks = {3, 4, 6, 3}; break;
    case 50: blocks = {3, 4, 6, 3}; break;
    case 101: blocks = {3, 4, 23, 3}; break;
    case 152: blocks = {3, 8, 36, 3}; break;
    default: throw std::invalid_argument(fmt::format("torchvision ResNet depth {} (18, 34, 50, 101, 152)", depth));
  }
  check_min_side(b, kTorchvisionMinSide, "a torchvision-shaped ResNet");
  b.conv(64, 7, 2, 3, false).bn().relu().maxpool(3, 2, 1);
  const int widths[] = {64, 128, 256, 512};
  for (std::size_t s = 0; s < 4; ++s)
    for (int i = 0; i < blocks[s]; ++i) {
      const int stride = i == 0 && s > 0 ? 2 : 1;
      if (bottlenecks)
        bottleneck(b, widths[s], stride);
      else
        basic_block(b, widths[s], stride);
    }
  b.global_avgpool().linear(classes);
}

}  // namespace ringtrain
