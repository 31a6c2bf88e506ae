// ONNX export through Debian's libonnx-dev: the protobuf classes generated from onnx.proto
// (onnx::ModelProto and friends), so the file's encoding is protobuf's own.
#include "export/OnnxExport.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "nn/Add.h"
#include "nn/BatchNorm2d.h"
#include "nn/Concat.h"
#include "nn/Conv2d.h"
#include "nn/Dropout.h"
#include "nn/Flatten.h"
#include "nn/GlobalAvgPool2d.h"
#include "nn/Graph.h"
#include "nn/Layer.h"
#include "nn/Linear.h"
#include "nn/LocalResponseNorm.h"
#include "nn/Model.h"
#include "nn/Pool2d.h"
#include "nn/ReLU.h"
#include "nn/ReLU6.h"

namespace ringtrain {
namespace {

// One graph under construction: each node reads the current tensor (by default the previous
// node's output) and any extra inputs it is given.
class GraphBuilder {
 public:
  // with_weights false: parameters and running statistics as dims only (a checkpoint's graph).
  GraphBuilder(onnx::GraphProto& graph, bool with_weights) : graph_(graph), with_weights_(with_weights) {}

  onnx::NodeProto& node(const std::string& op, const std::string& name, const std::vector<std::string>& extra_inputs) {
    onnx::NodeProto& n = *graph_.add_node();
    n.set_op_type(op);
    n.set_name(name);
    n.add_input(current_);
    for (const auto& in : extra_inputs) n.add_input(in);
    current_ = name + ".out";
    n.add_output(current_);
    return n;
  }

  // An initializer holding count floats at data with the given dims; returns its name. An
  // operator's constant (weight false: Clip's bounds, Dropout's ratio) keeps its data always.
  std::string constant(const std::string& name, const std::vector<std::int64_t>& dims, const float* data,
                       bool weight = true) {
    onnx::TensorProto& t = *graph_.add_initializer();
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::FLOAT);
    std::size_t count = 1;
    for (const auto d : dims) {
      t.add_dims(d);
      count *= static_cast<std::size_t>(d);
    }
    if (with_weights_ || !weight)
      t.set_raw_data(reinterpret_cast<const char*>(data), count * sizeof(float));  // little-endian, as ONNX stores it
    return name;
  }

  const std::string& current() const { return current_; }
  // The next node's first input.
  void set_current(const std::string& name) { current_ = name; }
  void rename_output(const std::string& name) {
    graph_.mutable_node(graph_.node_size() - 1)->set_output(0, name);
    current_ = name;
  }

 private:
  onnx::GraphProto& graph_;
  bool with_weights_;
  std::string current_ = "input";
};

void ints(onnx::NodeProto& n, const char* name, const std::vector<std::int64_t>& values) {
  onnx::AttributeProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (const auto v : values) a.add_ints(v);
}

void integer(onnx::NodeProto& n, const char* name, std::int64_t value) {
  onnx::AttributeProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(value);
}

void real(onnx::NodeProto& n, const char* name, float value) {
  onnx::AttributeProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(value);
}

void add_conv(GraphBuilder& g, const Conv2d& c) {
  std::vector<std::string> in{g.constant(c.name() + ".weight", c.params()[0].dims(), c.params()[0].data())};
  if (c.has_bias()) in.push_back(g.constant(c.name() + ".bias", c.params()[1].dims(), c.params()[1].data()));
  auto& n = g.node("Conv", c.name(), in);
  ints(n, "kernel_shape", {c.kernel(), c.kernel()});
  ints(n, "strides", {c.stride(), c.stride()});
  ints(n, "pads", {c.padding(), c.padding(), c.padding(), c.padding()});
  if (c.dilation() != 1) ints(n, "dilations", {c.dilation(), c.dilation()});
  if (c.groups() != 1) integer(n, "group", c.groups());
}

void add_relu6(GraphBuilder& g, const Layer& r) {
  // Clip takes its bounds as (scalar) inputs since opset 11.
  static const float kMin = 0.f, kMax = 6.f;
  g.node("Clip", r.name(),
         {g.constant(r.name() + ".min", {}, &kMin, false), g.constant(r.name() + ".max", {}, &kMax, false)});
}

void add_dropout(GraphBuilder& g, const Dropout& d) {
  // An identity at inference, as ONNX defines it; the ratio stays for whoever trains the file.
  const float ratio = d.p();
  g.node("Dropout", d.name(), {g.constant(d.name() + ".ratio", {}, &ratio, false)});
}

void add_linear(GraphBuilder& g, const Linear& l) {
  // Weights are (out, in): Gemm computes input x weight^T.
  std::vector<std::string> in{g.constant(l.name() + ".weight", l.params()[0].dims(), l.params()[0].data())};
  if (l.has_bias()) in.push_back(g.constant(l.name() + ".bias", l.params()[1].dims(), l.params()[1].data()));
  integer(g.node("Gemm", l.name(), in), "transB", 1);
}

void add_pool(GraphBuilder& g, const Pool2d& p) {
  auto& n = g.node(p.is_max() ? "MaxPool" : "AveragePool", p.name(), {});
  ints(n, "kernel_shape", {p.kernel(), p.kernel()});
  ints(n, "strides", {p.stride(), p.stride()});
  ints(n, "pads", {p.padding(), p.padding(), p.padding(), p.padding()});
  if (!p.is_max()) integer(n, "count_include_pad", 1);
}

void add_lrn(GraphBuilder& g, const LocalResponseNorm& l) {
  // Both oneDNN and ONNX divide alpha by size: the attributes carry over unchanged.
  auto& n = g.node("LRN", l.name(), {});
  integer(n, "size", l.size());
  real(n, "alpha", l.alpha());
  real(n, "beta", l.beta());
  real(n, "bias", l.k());
}

void add_batchnorm(GraphBuilder& g, const BatchNorm2d& b) {
  const std::vector<std::int64_t> c{b.channels()};
  const float* running = b.buffer_data();  // mean (C) then variance (C)
  if (running == nullptr) throw std::logic_error(fmt::format("{}: no running statistics bound", b.name()));
  auto& n = g.node("BatchNormalization", b.name(),
                   {g.constant(b.name() + ".weight", c, b.params()[0].data()),
                    g.constant(b.name() + ".bias", c, b.params()[1].data()),
                    g.constant(b.name() + ".running_mean", c, running),
                    g.constant(b.name() + ".running_var", c, running + b.channels())});
  real(n, "epsilon", b.eps());
  // ONNX's momentum is the weight of the old statistics (default 0.9, PyTorch's 0.1).
  if (std::abs(b.momentum() - 0.1f) > 1e-6f) real(n, "momentum", 1.0f - b.momentum());
}

void add_add(GraphBuilder& g, const Add& a, const std::vector<std::string>& rest) {
  // ONNX's Add is binary; Sum takes any number of inputs.
  g.node(a.num_inputs() == 2 ? "Add" : "Sum", a.name(), rest);
  if (a.fused_relu()) g.node("Relu", a.name() + ".relu", {});
}

// rest: the layer's inputs after the first (the current tensor), as ONNX names.
void add_layer(GraphBuilder& g, const Layer& layer, const std::vector<std::string>& rest) {
  if (const auto* a = dynamic_cast<const Add*>(&layer)) return add_add(g, *a, rest);
  if (dynamic_cast<const Concat*>(&layer) != nullptr) return integer(g.node("Concat", layer.name(), rest), "axis", 1);
  if (const auto* c = dynamic_cast<const Conv2d*>(&layer)) return add_conv(g, *c);
  if (const auto* l = dynamic_cast<const Linear*>(&layer)) return add_linear(g, *l);
  if (const auto* p = dynamic_cast<const Pool2d*>(&layer)) return add_pool(g, *p);
  if (const auto* r = dynamic_cast<const LocalResponseNorm*>(&layer)) return add_lrn(g, *r);
  if (const auto* b = dynamic_cast<const BatchNorm2d*>(&layer)) return add_batchnorm(g, *b);
  if (dynamic_cast<const ReLU*>(&layer) != nullptr) return (void)g.node("Relu", layer.name(), {});
  if (dynamic_cast<const ReLU6*>(&layer) != nullptr) return add_relu6(g, layer);
  if (dynamic_cast<const GlobalAvgPool2d*>(&layer) != nullptr)
    return (void)g.node("GlobalAveragePool", layer.name(), {});
  if (dynamic_cast<const Flatten*>(&layer) != nullptr) return integer(g.node("Flatten", layer.name(), {}), "axis", 1);
  if (const auto* d = dynamic_cast<const Dropout*>(&layer)) return add_dropout(g, *d);
  throw std::invalid_argument(fmt::format("{}: no ONNX export for layer kind '{}'", layer.name(), layer.kind()));
}

void add_value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& list, const std::string& name,
               const std::vector<std::int64_t>& dims) {
  onnx::ValueInfoProto& v = *list.Add();
  v.set_name(name);
  auto& type = *v.mutable_type()->mutable_tensor_type();
  type.set_elem_type(onnx::TensorProto::FLOAT);
  type.mutable_shape()->add_dim()->set_dim_param("N");
  for (const auto d : dims) type.mutable_shape()->add_dim()->set_dim_value(d);
}

onnx::ModelProto build_model(const Model& model, bool with_weights) {
  onnx::ModelProto m;
  m.set_ir_version(onnx::IR_VERSION);
  m.set_producer_name("ringtrain");
  m.set_producer_version(RINGTRAIN_VERSION);
  onnx::OperatorSetIdProto& opset = *m.add_opset_import();
  opset.set_domain("");
  opset.set_version(kOnnxOpset);
  onnx::GraphProto& graph = *m.mutable_graph();
  graph.set_name(model.name());
  const ImageShape in = model.input_shape();
  add_value(*graph.mutable_input(), "input", {in.channels, in.height, in.width});
  GraphBuilder g(graph, with_weights);
  const Graph& layers = model.graph();
  std::vector<std::string> names{"input"};  // ONNX name of each value (Graph's numbering)
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto& inputs = layers.node(i).inputs;
    std::vector<std::string> rest;
    for (std::size_t k = 1; k < inputs.size(); ++k) rest.push_back(names[static_cast<std::size_t>(inputs[k])]);
    g.set_current(names[static_cast<std::size_t>(inputs[0])]);
    add_layer(g, layers.layer(i), rest);
    names.push_back(g.current());
  }
  g.rename_output("logits");
  add_value(*graph.mutable_output(), "logits", {model.classes()});
  return m;
}

}  // namespace

std::string onnx_bytes(const Model& model, bool with_weights) {
  std::string bytes;
  if (!build_model(model, with_weights).SerializeToString(&bytes))
    throw std::runtime_error(fmt::format("model {}: cannot serialise as ONNX", model.name()));
  return bytes;
}

void write_onnx(const Model& model, const std::filesystem::path& out) {
  const onnx::ModelProto proto = build_model(model, true);
  std::filesystem::path tmp = out;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f || !proto.SerializeToOstream(&f) || !f.flush()) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw std::runtime_error(fmt::format("{}: cannot write the ONNX file", out.string()));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, out, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw std::runtime_error(fmt::format("{}: cannot write the ONNX file ({})", out.string(), ec.message()));
  }
}

}  // namespace ringtrain
