// Graph: Kahn's sort with ties in insertion order, shape inference, gradient flow.
#include "nn/Graph.h"

#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "nn/ReLU.h"

namespace ringtrain {

const std::string& Graph::add(std::unique_ptr<Layer> layer, std::vector<std::string> inputs) {
  if (inputs.size() != layer->num_inputs())
    throw std::invalid_argument(
        fmt::format("{}: takes {} inputs, given {}", layer->name(), layer->num_inputs(), inputs.size()));
  nodes_.push_back({std::move(layer), std::move(inputs), {}});
  return nodes_.back().layer->name();
}

void Graph::sort() {
  std::map<std::string, std::size_t> producer;  // name -> node index (insertion order)
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const std::string& name = nodes_[i].layer->name();
    if (name == kInputName || !producer.emplace(name, i).second)
      throw std::invalid_argument(fmt::format("{}: two tensors of this name in the graph", name));
  }
  // Kahn: repeatedly take the earliest-inserted node whose inputs are all available.
  std::vector<std::size_t> missing(nodes_.size(), 0);
  std::vector<std::vector<std::size_t>> consumers(nodes_.size());
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    for (const auto& in : nodes_[i].input_names) {
      if (in == kInputName) continue;
      const auto it = producer.find(in);
      if (it == producer.end())
        throw std::invalid_argument(fmt::format("{}: reads '{}', which no layer writes", nodes_[i].layer->name(), in));
      ++missing[i];
      consumers[it->second].push_back(i);
    }
  }
  std::vector<std::size_t> order;
  std::vector<bool> done(nodes_.size(), false);
  while (order.size() < nodes_.size()) {
    std::size_t next = nodes_.size();
    for (std::size_t i = 0; i < nodes_.size() && next == nodes_.size(); ++i)
      if (!done[i] && missing[i] == 0) next = i;
    if (next == nodes_.size())
      throw std::invalid_argument("graph: a cycle (no layer left whose inputs are all computed)");
    done[next] = true;
    order.push_back(next);
    for (const std::size_t c : consumers[next]) --missing[c];
  }
  std::vector<Node> sorted;
  for (const std::size_t i : order) sorted.push_back(std::move(nodes_[i]));
  nodes_ = std::move(sorted);
  std::map<std::string, int> value;
  value[kInputName] = kInput;
  for (std::size_t i = 0; i < nodes_.size(); ++i) value[nodes_[i].layer->name()] = output_of(i);
  for (auto& n : nodes_) {
    n.inputs.clear();
    for (const auto& in : n.input_names) n.inputs.push_back(value.at(in));
  }
}

void Graph::finalize(const Dims& input) {
  if (nodes_.empty()) throw std::invalid_argument("graph: no layers");
  sort();
  const std::size_t values = nodes_.size() + 1;
  shapes_.assign(1, input);
  readers_.assign(values, {});
  needs_grad_.assign(values, false);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    std::vector<Dims> in;
    bool grad = !n.layer->param_specs().empty();
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      in.push_back(shapes_[static_cast<std::size_t>(n.inputs[k])]);
      readers_[static_cast<std::size_t>(n.inputs[k])].push_back({static_cast<int>(i), static_cast<int>(k)});
      grad = grad || needs_grad_[static_cast<std::size_t>(n.inputs[k])];
    }
    shapes_.push_back(n.layer->out_shape_of(in));
    needs_grad_[static_cast<std::size_t>(output_of(i))] = grad;
  }
  for (std::size_t v = 0; v + 1 < values; ++v)
    if (readers_[v].empty())
      throw std::invalid_argument(fmt::format("graph: nothing reads '{}' (one output only: the last layer's)",
                                              value_name(static_cast<int>(v))));
  apply_fusions();
}

void Graph::set_fusions(bool on) {
  fusions_ = on;
  if (!shapes_.empty()) apply_fusions();
}

void Graph::apply_fusions() {
  fused_into_.assign(nodes_.size(), -1);
  for (auto& n : nodes_) {
    if (n.layer->relu_post_op()) n.layer->set_relu_post_op(false);
    if (auto* relu = dynamic_cast<ReLU*>(n.layer.get())) relu->set_fused(ReluFusion::kNone);
  }
  if (!fusions_) return;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    auto* relu = dynamic_cast<ReLU*>(nodes_[i].layer.get());
    const int v = nodes_[i].inputs[0];
    // Only the ReLU may read the producer's output: nobody else may see it before the ReLU.
    if (relu == nullptr || v == kInput || readers(v).size() != 1) continue;
    Layer& producer = *nodes_[static_cast<std::size_t>(v - 1)].layer;
    if (producer.relu_fusion() == ReluFusion::kNone) continue;
    producer.set_relu_post_op(true);
    relu->set_fused(producer.relu_fusion());
    fused_into_[i] = v - 1;
  }
}

const std::string& Graph::value_name(int value) const {
  static const std::string input = kInputName;
  return value == kInput ? input : nodes_.at(static_cast<std::size_t>(value - 1)).layer->name();
}

bool Graph::need_diff_src(std::size_t i) const {
  for (const int v : nodes_.at(i).inputs)
    if (needs_grad(v)) return true;
  return false;
}

bool Graph::is_chain_link(std::size_t i) const {
  const auto& in = nodes_.at(i).inputs;
  return in.size() == 1 && in[0] == static_cast<int>(i);
}

}  // namespace ringtrain
