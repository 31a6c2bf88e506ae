// OnnxImporter: maps the nodes of an ONNX graph, visited in topological order, onto layers
// of a Graph, tracking each tensor's dims (N = 1) so every layer's size follows from its
// input and a shape that does not fit fails at the node that cannot take it. Nodes that
// compute nothing (Identity, Constant) become aliases; MatMul + Add becomes one Linear, and a
// Relu that alone reads an Add fuses into it (as the zoo's residual joins).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "nn/Tensor.h"
#include "onnx/OnnxReader.h"
#include "onnx/OnnxTensor.h"

namespace onnx {
class NodeProto;
}

namespace ringtrain {

class Layer;

class OnnxImporter {
 public:
  // source: the file, for errors; input: the graph input's ONNX name and dims (N = 1).
  OnnxImporter(std::string source, bool need_weights, const std::string& input, const Dims& dims, OnnxNetwork& net);

  // An initializer or a Constant's output.
  void add_constant(const std::string& name, OnnxTensor t);
  bool is_constant(const std::string& name) const { return constants_.count(name) > 0; }
  // The nodes reading each ONNX value, for the fusions (set before import()).
  void set_readers(std::map<std::string, std::vector<const onnx::NodeProto*>> readers) { readers_ = std::move(readers); }
  // The graph's output: no fusion hides it.
  void set_output(const std::string& name) { output_ = name; }
  void import(const onnx::NodeProto& n);
  // The layer tensor an ONNX value maps to and its dims; throws naming the graph output.
  const std::string& tensor(const std::string& onnx_name) const;
  const Dims& dims(const std::string& tensor) const { return dims_.at(tensor); }

 private:
  [[noreturn]] void fail(const onnx::NodeProto& n, const std::string& why) const;
  // Input k as a layer tensor (must be computed by a node or be the graph input).
  const std::string& in(const onnx::NodeProto& n, int k) const;
  // Input k as a constant (an initializer or a Constant node's output).
  const OnnxTensor& constant(const onnx::NodeProto& n, int k) const;
  // A weight input: float, dims as given, data when the file has weights.
  const OnnxTensor& weight(const onnx::NodeProto& n, int k, const Dims& expected) const;
  std::string layer_name(const onnx::NodeProto& n);
  // Adds layer reading inputs; its output stands for n's first output (and alias's, if given).
  void push(const onnx::NodeProto& n, std::unique_ptr<Layer> layer, std::vector<std::string> inputs,
            const onnx::NodeProto* alias = nullptr);
  void param(const std::string& layer, const char* suffix, const OnnxTensor& t);
  // The one node reading n's first output, if exactly one does and it is not the graph's output.
  const onnx::NodeProto* sole_reader(const onnx::NodeProto& n) const;
  void only_attributes(const onnx::NodeProto& n, const std::set<std::string>& known) const;

  // An op without attributes or weights on one input (Relu, GlobalAveragePool).
  void unary(const onnx::NodeProto& n, std::unique_ptr<Layer> layer);
  void conv(const onnx::NodeProto& n);
  void batchnorm(const onnx::NodeProto& n);
  void clip(const onnx::NodeProto& n);
  void add(const onnx::NodeProto& n);
  void concat(const onnx::NodeProto& n);
  void pool(const onnx::NodeProto& n, bool max);
  void gemm(const onnx::NodeProto& n);
  void matmul(const onnx::NodeProto& n);
  void flatten(const onnx::NodeProto& n);
  void reshape(const onnx::NodeProto& n);
  void dropout(const onnx::NodeProto& n);
  void lrn(const onnx::NodeProto& n);
  void constant_node(const onnx::NodeProto& n);
  void linear(const onnx::NodeProto& n, const OnnxTensor& w, bool transposed, const OnnxTensor* bias,
              const onnx::NodeProto* alias);

  std::string source_;
  bool need_weights_;
  OnnxNetwork& net_;
  std::map<std::string, std::string> alias_;  // ONNX value -> layer tensor
  std::map<std::string, Dims> dims_;          // layer tensor -> dims (N = 1)
  std::map<std::string, OnnxTensor> constants_;
  std::map<std::string, std::vector<const onnx::NodeProto*>> readers_;
  std::set<const onnx::NodeProto*> fused_;  // nodes already folded into an earlier layer
  std::set<std::string> used_weights_;
  std::string output_;
};

}  // namespace ringtrain
