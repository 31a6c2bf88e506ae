// The model zoo: each model is written down once here as a sequence of layers.
#include "nn/ModelZoo.h"

#include <functional>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "nn/BatchNorm2d.h"
#include "nn/Conv2d.h"
#include "nn/Dropout.h"
#include "nn/Flatten.h"
#include "nn/Linear.h"
#include "nn/LocalResponseNorm.h"
#include "nn/Pool2d.h"
#include "nn/ReLU.h"

namespace ringtrain {
namespace {

// Appends layers while tracking the activation shape, so that each layer's size follows
// from the previous one and an impossible input fails at the layer that cannot take it.
class Builder {
 public:
  Builder(const std::string& model, ImageShape input)
      : model_(model), dims_{1, input.channels, input.height, input.width} {}

  Builder& conv(int out, int k, int stride = 1, int pad = 0) {
    return add(std::make_unique<Conv2d>(next("conv"), static_cast<int>(dims_[1]), out, k, stride, pad));
  }
  Builder& relu() { return add(std::make_unique<ReLU>(next("relu"))); }
  Builder& maxpool(int k, int stride) {
    return add(std::make_unique<Pool2d>(next("maxpool"), Pool2d::Mode::kMax, k, stride));
  }
  Builder& avgpool(int k, int stride) {
    return add(std::make_unique<Pool2d>(next("avgpool"), Pool2d::Mode::kAvg, k, stride));
  }
  Builder& bn() { return add(std::make_unique<BatchNorm2d>(next("bn"), static_cast<int>(dims_[1]))); }
  Builder& lrn() { return add(std::make_unique<LocalResponseNorm>(next("lrn"))); }
  Builder& dropout(float p) { return add(std::make_unique<Dropout>(next("dropout"), p)); }
  Builder& flatten() { return add(std::make_unique<Flatten>(next("flatten"))); }
  Builder& linear(int out) {
    if (dims_.size() != 2) flatten();
    return add(std::make_unique<Linear>(next("fc"), static_cast<int>(dims_[1]), out));
  }

  std::vector<std::unique_ptr<Layer>> take() { return std::move(layers_); }

 private:
  std::string next(const std::string& kind) { return fmt::format("{}{}", kind, ++counts_[kind]); }
  Builder& add(std::unique_ptr<Layer> layer) {
    try {
      dims_ = layer->out_shape(dims_);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("model {}: {}", model_, e.what()));
    }
    layers_.push_back(std::move(layer));
    return *this;
  }
  std::string model_;
  Dims dims_;
  std::map<std::string, int> counts_;
  std::vector<std::unique_ptr<Layer>> layers_;
};

struct ZooModel {
  ZooEntry entry;
  std::function<void(Builder&, int classes)> build;
};

const std::vector<ZooModel>& zoo() {
  static const std::vector<ZooModel> models{
      {{"logreg", "multinomial logistic regression: flatten, linear to classes"},
       [](Builder& b, int classes) { b.flatten().linear(classes); }},
      {{"mlp", "deep MLP: input-1024-512-256-128-64-32-classes, ReLU (3,846,442 params on 3x32x32, 10 classes)"},
       [](Builder& b, int classes) {
         b.flatten();
         for (int width : {1024, 512, 256, 128, 64, 32}) b.linear(width).relu();
         b.linear(classes);
       }},
      {{"lenet5",
        "LeNet-5: conv 6@5x5 p2, pool, conv 16@5x5, pool, fc 120-84-classes, ReLU (61,706 params on 1x28x28)"},
       [](Builder& b, int classes) {
         b.conv(6, 5, 1, 2).relu().maxpool(2, 2).conv(16, 5).relu().maxpool(2, 2);
         b.linear(120).relu().linear(84).relu().linear(classes);
       }},
      {{"svhn-cnn",
        "small CNN: conv 6@5x5 p1, pool, conv 16@5x5 p1, pool, fc 64-classes, ReLU (40,450 params on 3x32x32)"},
       [](Builder& b, int classes) {
         b.conv(6, 5, 1, 1).relu().maxpool(2, 2).conv(16, 5, 1, 1).relu().maxpool(2, 2);
         b.linear(64).relu().linear(classes);
       }},
      // CIFAR-sized AlexNet: conv 64@5x5 p2, ReLU, LRN, maxpool 2; conv 192@5x5 p2, ReLU, LRN,
      // maxpool 2; conv 384@3x3 p1, 256@3x3 p1, 256@3x3 p1 (each + ReLU), maxpool 2; dropout
      // 0.5, fc 1024, ReLU, dropout 0.5, fc 1024, ReLU, fc classes. LRN: size 5, alpha 1e-4
      // (divided by size), beta 0.75, k 2. 7,706,442 params on 3x32x32 (flatten 256x4x4).
      {{"alexnet",
        "CIFAR AlexNet: conv 64-192-384-256-256 (LRN after the first two), fc 1024-1024-classes, dropout 0.5"},
       [](Builder& b, int classes) {
         b.conv(64, 5, 1, 2).relu().lrn().maxpool(2, 2);
         b.conv(192, 5, 1, 2).relu().lrn().maxpool(2, 2);
         b.conv(384, 3, 1, 1).relu().conv(256, 3, 1, 1).relu().conv(256, 3, 1, 1).relu().maxpool(2, 2);
         b.flatten().dropout(0.5f).linear(1024).relu().dropout(0.5f).linear(1024).relu().linear(classes);
       }},
      {{"vgg11", "VGG-11 with BatchNorm (cfg 64,M,128,M,256,256,M,512,512,M,512,512,M), linear to classes"},
       [](Builder& b, int classes) {
         for (int v : {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0}) {
           if (v == 0)
             b.maxpool(2, 2);
           else
             b.conv(v, 3, 1, 1).bn().relu();
         }
         b.linear(classes);
       }},
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

std::vector<std::unique_ptr<Layer>> build_zoo_layers(const std::string& name, ImageShape input, int classes) {
  if (input.channels <= 0 || input.height <= 0 || input.width <= 0)
    throw std::invalid_argument(fmt::format("model {}: invalid input shape {}", name, input.str()));
  if (classes < 2)
    throw std::invalid_argument(fmt::format("model {}: needs at least 2 classes, got {}", name, classes));
  for (const auto& m : zoo()) {
    if (m.entry.name != name) continue;
    Builder b(name, input);
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
