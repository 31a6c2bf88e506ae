// ZooBuilder: writes a zoo model down as a layer graph while tracking every tensor's shape,
// so each layer's size follows from its input and an impossible input fails at the layer
// that cannot take it. Single-input calls read the current tensor and make their output
// current; at() moves to another tensor to start a branch; add() and concat() join branches.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/ImageShape.h"
#include "nn/Graph.h"

namespace ringtrain {

class ZooBuilder {
 public:
  ZooBuilder(std::string model, ImageShape input);

  ZooBuilder& conv(int out, int k, int stride = 1, int pad = 0, bool bias = true);
  // groups divides the input channels and out (groups == channels: depthwise).
  ZooBuilder& grouped_conv(int out, int k, int stride, int pad, int groups, bool bias);
  ZooBuilder& relu();
  ZooBuilder& relu6();
  ZooBuilder& maxpool(int k, int stride, int pad = 0);
  ZooBuilder& avgpool(int k, int stride);
  // Average over the whole spatial extent: (N, C, H, W) -> (N, C, 1, 1).
  ZooBuilder& global_avgpool();
  ZooBuilder& bn();
  ZooBuilder& lrn();
  ZooBuilder& dropout(float p);
  ZooBuilder& flatten();
  ZooBuilder& linear(int out, bool bias = true);
  // Element-wise sum of the named tensors (then ReLU in the same primitive if relu).
  ZooBuilder& add(std::vector<std::string> tensors, bool relu = false);
  // The named tensors joined along channels.
  ZooBuilder& concat(std::vector<std::string> tensors);

  // The current tensor's name and its dims (N = 1); at() makes tensor current.
  const std::string& current() const noexcept { return current_; }
  const Dims& dims() const { return dims_.at(current_); }
  ZooBuilder& at(const std::string& tensor);

  const std::string& model() const noexcept { return model_; }
  Graph take() { return std::move(graph_); }

 private:
  std::string next(const std::string& kind);
  ZooBuilder& push(std::unique_ptr<Layer> layer, std::vector<std::string> inputs);
  std::string model_;
  std::map<std::string, Dims> dims_;
  std::string current_;
  std::map<std::string, int> counts_;
  Graph graph_;
};

}  // namespace ringtrain
