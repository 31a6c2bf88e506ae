// ZooBuilder: layer construction from the tracked shapes, and the graph's edges.
#include "nn/ZooBuilder.h"

#include <stdexcept>

#include <fmt/format.h>

#include "nn/Add.h"
#include "nn/BatchNorm2d.h"
#include "nn/Concat.h"
#include "nn/Conv2d.h"
#include "nn/Dropout.h"
#include "nn/Flatten.h"
#include "nn/GlobalAvgPool2d.h"
#include "nn/Linear.h"
#include "nn/LocalResponseNorm.h"
#include "nn/Pool2d.h"
#include "nn/ReLU.h"
#include "nn/ReLU6.h"

namespace ringtrain {

ZooBuilder::ZooBuilder(std::string model, ImageShape input) : model_(std::move(model)), current_(Graph::kInputName) {
  dims_[current_] = {1, input.channels, input.height, input.width};
}

ZooBuilder& ZooBuilder::conv(int out, int k, int stride, int pad, bool bias) {
  return push(std::make_unique<Conv2d>(next("conv"), static_cast<int>(dims()[1]), out, k, stride, pad, bias),
              {current_});
}
ZooBuilder& ZooBuilder::grouped_conv(int out, int k, int stride, int pad, int groups, bool bias) {
  const Conv2d::Options o{.in = static_cast<int>(dims()[1]), .out = out, .kernel = k, .stride = stride, .pad = pad,
                          .groups = groups, .bias = bias};
  return push(std::make_unique<Conv2d>(next("conv"), o), {current_});
}
ZooBuilder& ZooBuilder::relu6() { return push(std::make_unique<ReLU6>(next("relu6")), {current_}); }
ZooBuilder& ZooBuilder::relu() { return push(std::make_unique<ReLU>(next("relu")), {current_}); }
ZooBuilder& ZooBuilder::maxpool(int k, int stride, int pad) {
  return push(std::make_unique<Pool2d>(next("maxpool"), Pool2d::Mode::kMax, k, stride, pad), {current_});
}
ZooBuilder& ZooBuilder::avgpool(int k, int stride) {
  return push(std::make_unique<Pool2d>(next("avgpool"), Pool2d::Mode::kAvg, k, stride), {current_});
}
ZooBuilder& ZooBuilder::global_avgpool() {
  return push(std::make_unique<GlobalAvgPool2d>(next("gap")), {current_});
}
ZooBuilder& ZooBuilder::bn() {
  return push(std::make_unique<BatchNorm2d>(next("bn"), static_cast<int>(dims()[1])), {current_});
}
ZooBuilder& ZooBuilder::lrn() { return push(std::make_unique<LocalResponseNorm>(next("lrn")), {current_}); }
ZooBuilder& ZooBuilder::dropout(float p) { return push(std::make_unique<Dropout>(next("dropout"), p), {current_}); }
ZooBuilder& ZooBuilder::flatten() { return push(std::make_unique<Flatten>(next("flatten")), {current_}); }
ZooBuilder& ZooBuilder::linear(int out, bool bias) {
  if (dims().size() != 2) flatten();
  return push(std::make_unique<Linear>(next("fc"), static_cast<int>(dims()[1]), out, bias), {current_});
}
ZooBuilder& ZooBuilder::add(std::vector<std::string> tensors, bool relu) {
  const std::size_t n = tensors.size();
  return push(std::make_unique<Add>(next("add"), n, relu), std::move(tensors));
}
ZooBuilder& ZooBuilder::concat(std::vector<std::string> tensors) {
  const std::size_t n = tensors.size();
  return push(std::make_unique<Concat>(next("concat"), n), std::move(tensors));
}

ZooBuilder& ZooBuilder::at(const std::string& tensor) {
  if (!dims_.count(tensor)) throw std::logic_error(fmt::format("model {}: no tensor '{}'", model_, tensor));
  current_ = tensor;
  return *this;
}

std::string ZooBuilder::next(const std::string& kind) { return fmt::format("{}{}", kind, ++counts_[kind]); }

ZooBuilder& ZooBuilder::push(std::unique_ptr<Layer> layer, std::vector<std::string> inputs) {
  std::vector<Dims> in;
  for (const auto& t : inputs) in.push_back(dims_.at(t));
  try {
    dims_[layer->name()] = layer->out_shape_of(in);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("model {}: {}", model_, e.what()));
  }
  current_ = graph_.add(std::move(layer), std::move(inputs));
  return *this;
}

}  // namespace ringtrain
