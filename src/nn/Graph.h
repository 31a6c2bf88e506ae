// Graph: a model's layers as a directed acyclic graph over named tensors. Each node is a
// layer that reads one or more tensors by name and writes one, named after the layer; the
// model's input is "input". finalize() Kahn-sorts the nodes (ties in insertion order, so a
// graph written in order keeps it), infers the shapes and works out which tensors need a
// gradient. A sequential model is a chain: node i reads node i-1's output.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/Layer.h"

namespace ringtrain {

class Graph {
 public:
  // Values: 0 is the model's input, i + 1 node i's output (after finalize, in sorted order).
  static constexpr int kInput = 0;
  static constexpr const char* kInputName = "input";

  struct Node {
    std::unique_ptr<Layer> layer;
    std::vector<std::string> input_names;
    std::vector<int> inputs;  // value ids, set by finalize()
  };
  // One place a value is read: node `node`'s input slot `slot`.
  struct Reader {
    int node = 0;
    int slot = 0;
  };

  // Adds a node reading the named tensors; returns its output's name (the layer's).
  const std::string& add(std::unique_ptr<Layer> layer, std::vector<std::string> inputs);

  // Sorts and checks the graph for input dims (N first). Throws std::invalid_argument
  // naming the node for a duplicate name, an unknown or cyclic input, a shape it cannot take,
  // or a tensor nobody reads (a graph has exactly one output, the last node's).
  void finalize(const Dims& input);

  // Training-valid fusions (on by default, applied by finalize and by every later call): a
  // ReLU that alone reads a convolution's or a batch norm's output runs inside that layer
  // (Layer::relu_fusion). The parameters, their order and the signature do not change.
  void set_fusions(bool on);
  bool fusions() const noexcept { return fusions_; }
  // The node whose layer runs node i's ReLU, or -1 (after finalize).
  int fused_into(std::size_t i) const { return fused_into_.at(i); }

  std::size_t size() const noexcept { return nodes_.size(); }
  const Node& node(std::size_t i) const { return nodes_.at(i); }
  Layer& layer(std::size_t i) const { return *nodes_.at(i).layer; }
  static int output_of(std::size_t node) { return static_cast<int>(node) + 1; }
  int output() const { return static_cast<int>(nodes_.size()); }
  std::size_t num_values() const noexcept { return shapes_.size(); }
  const Dims& shape(int value) const { return shapes_.at(static_cast<std::size_t>(value)); }
  const std::string& value_name(int value) const;
  // In sorted order; backward visits them in reverse.
  const std::vector<Reader>& readers(int value) const { return readers_.at(static_cast<std::size_t>(value)); }
  // Whether a gradient flows into the value (some layer upstream of it has parameters).
  bool needs_grad(int value) const { return needs_grad_.at(static_cast<std::size_t>(value)); }
  // Whether node i must compute any input gradient / has any backward work at all.
  bool need_diff_src(std::size_t i) const;
  bool runs_backward(std::size_t i) const { return needs_grad(output_of(i)); }
  // Node i reads exactly the previous node's output (node 0: the input): a link of a chain.
  bool is_chain_link(std::size_t i) const;

 private:
  void sort();
  void apply_fusions();
  std::vector<Node> nodes_;
  std::vector<Dims> shapes_;
  std::vector<std::vector<Reader>> readers_;
  std::vector<bool> needs_grad_;
  bool fusions_ = true;
  std::vector<int> fused_into_;
};

}  // namespace ringtrain
