// The model zoo: each model is written down once here as a layer graph (the sequential ones
// as chains).
#include "nn/ModelZoo.h"

#include <functional>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "nn/ZooBuilder.h"
#include "nn/ZooMobileNet.h"
#include "nn/ZooResNet.h"


namespace ringtrain {
namespace {

struct ZooModel {
  ZooEntry entry;
  std::function<void(ZooBuilder&, int classes)> build;
};

const std::vector<ZooModel>& zoo() {
  static const std::vector<ZooModel> models{
      {{"logreg", "multinomial logistic regression: flatten, linear to classes"},
       [](ZooBuilder& b, int classes) { b.flatten().linear(classes); }},
      {{"mlp", "deep MLP: input-1024-512-256-128-64-32-classes, ReLU (3,846,442 params on 3x32x32, 10 classes)"},
       [](ZooBuilder& b, int classes) {
         b.flatten();
         for (int width : {1024, 512, 256, 128, 64, 32}) b.linear(width).relu();
         b.linear(classes);
       }},
      {{"lenet5",
        "LeNet-5: conv 6@5x5 p2, pool, conv 16@5x5, pool, fc 120-84-classes, ReLU (61,706 params on 1x28x28)"},
       [](ZooBuilder& b, int classes) {
         b.conv(6, 5, 1, 2).relu().maxpool(2, 2).conv(16, 5).relu().maxpool(2, 2);
         b.linear(120).relu().linear(84).relu().linear(classes);
       }},
      {{"svhn-cnn",
        "small CNN: conv 6@5x5 p1, pool, conv 16@5x5 p1, pool, fc 64-classes, ReLU (40,450 params on 3x32x32)"},
       [](ZooBuilder& b, int classes) {
         b.conv(6, 5, 1, 1).relu().maxpool(2, 2).conv(16, 5, 1, 1).relu().maxpool(2, 2);
         b.linear(64).relu().linear(classes);
       }},
      // CIFAR-sized AlexNet: conv 64@5x5 p2, ReLU, LRN, maxpool 2; conv 192@5x5 p2, ReLU, LRN,
      // maxpool 2; conv 384@3x3 p1, 256@3x3 p1, 256@3x3 p1 (each + ReLU), maxpool 2; dropout
      // 0.5, fc 1024, ReLU, dropout 0.5, fc 1024, ReLU, fc classes. LRN: size 5, alpha 1e-4
      // (divided by size), beta 0.75, k 2. 7,706,442 params on 3x32x32 (flatten 256x4x4).
      {{"alexnet",
        "CIFAR AlexNet: conv 64-192-384-256-256 (LRN after the first two), fc 1024-1024-classes, dropout 0.5"},
       [](ZooBuilder& b, int classes) {
         b.conv(64, 5, 1, 2).relu().lrn().maxpool(2, 2);
         b.conv(192, 5, 1, 2).relu().lrn().maxpool(2, 2);
         b.conv(384, 3, 1, 1).relu().conv(256, 3, 1, 1).relu().conv(256, 3, 1, 1).relu().maxpool(2, 2);
         b.flatten().dropout(0.5f).linear(1024).relu().dropout(0.5f).linear(1024).relu().linear(classes);
       }},
      {{"vgg11", "VGG-11 with BatchNorm (cfg 64,M,128,M,256,256,M,512,512,M,512,512,M), linear to classes"},
       [](ZooBuilder& b, int classes) {
         for (int v : {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0}) {
           if (v == 0)
             b.maxpool(2, 2);
           else
             b.conv(v, 3, 1, 1).bn().relu();
         }
         b.linear(classes);
       }},
      {{"resnet20",
        "CIFAR ResNet-20 (He et al. 2015): 3 stages x 3 basic blocks at 16/32/64, projection shortcuts (option B: "
        "1x1 conv + BN where the shape changes), global average pool; inputs from 8x8"},
       [](ZooBuilder& b, int classes) { build_cifar_resnet(b, 20, classes); }},
      {{"resnet56",
        "CIFAR ResNet-56 (He et al. 2015): 3 stages x 9 basic blocks at 16/32/64, projection shortcuts (option B: "
        "1x1 conv + BN where the shape changes), global average pool; inputs from 8x8"},
       [](ZooBuilder& b, int classes) { build_cifar_resnet(b, 56, classes); }},
      {{"resnet18", "ResNet-18 as torchvision: 7x7/2 stem, max pool, basic blocks 2-2-2-2, global average pool; "
                    "inputs from 32x32"},
       [](ZooBuilder& b, int classes) { build_torchvision_resnet(b, 18, classes); }},
      {{"resnet50", "ResNet-50 as torchvision: 7x7/2 stem, max pool, bottlenecks 3-4-6-3 (stride on the 3x3), "
                    "global average pool; inputs from 32x32"},
       [](ZooBuilder& b, int classes) { build_torchvision_resnet(b, 50, classes); }},
      {{"mobilenetv2", "MobileNetV2 as torchvision (width 1.0): inverted residuals, depthwise 3x3, ReLU6, global "
                       "average pool, dropout 0.2; inputs from 32x32"},
       [](ZooBuilder& b, int classes) { build_mobilenet_v2(b, classes); }},
  };
  return models;
}

}  // namespace

const std::vector<ZooEntry>& model_zoo() {
  static const std::vector<ZooEntry> entries = [] {
    std::vector<ZooEntry> e;
    for (const auto& m : zoo()) e.push_back(m.entry);
    return e;
  }();
  return entries;
}

Graph build_zoo_graph(const std::string& name, ImageShape input, int classes) {
  if (input.channels <= 0 || input.height <= 0 || input.width <= 0)
    throw std::invalid_argument(fmt::format("model {}: invalid input shape {}", name, input.str()));
  if (classes < 2)
    throw std::invalid_argument(fmt::format("model {}: needs at least 2 classes, got {}", name, classes));
  for (const auto& m : zoo()) {
    if (m.entry.name != name) continue;
    ZooBuilder b(name, input);
    m.build(b, classes);
    return b.take();
  }
  std::string known;
  for (const auto& m : zoo()) {
    if (!known.empty()) known.append(", ");
    known.append(m.entry.name);
  }
  throw std::invalid_argument(fmt::format("unknown model '{}' (known: {})", name, known));
}

}  // namespace ringtrain
