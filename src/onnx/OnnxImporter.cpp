// OnnxImporter: the tensor bookkeeping, the dispatch by op and the ops that take no weights.
#include "onnx/OnnxImporter.h"

#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <onnx/onnx_pb.h>

#include "nn/Add.h"
#include "nn/Concat.h"
#include "nn/Dropout.h"
#include "nn/Flatten.h"
#include "nn/GlobalAvgPool2d.h"
#include "nn/LocalResponseNorm.h"
#include "nn/ReLU.h"
#include "nn/ReLU6.h"
#include "onnx/OnnxAttributes.h"

namespace ringtrain {

OnnxImporter::OnnxImporter(std::string source, bool need_weights, const std::string& input, const Dims& dims,
                           OnnxNetwork& net)
    : source_(std::move(source)), need_weights_(need_weights), net_(net) {
  alias_[input] = Graph::kInputName;
  dims_[Graph::kInputName] = dims;
}

void OnnxImporter::add_constant(const std::string& name, OnnxTensor t) { constants_[name] = std::move(t); }

void OnnxImporter::fail(const onnx::NodeProto& n, const std::string& why) const {
  throw std::runtime_error(fmt::format("{}: node '{}' ({}): {}", source_, n.name(), n.op_type(), why));
}

const std::string& OnnxImporter::tensor(const std::string& onnx_name) const {
  const auto it = alias_.find(onnx_name);
  if (it == alias_.end())
    throw std::runtime_error(fmt::format("{}: output '{}' is not computed by any supported node", source_, onnx_name));
  return it->second;
}

const std::string& OnnxImporter::in(const onnx::NodeProto& n, int k) const {
  if (k >= n.input_size() || n.input(k).empty()) fail(n, fmt::format("input {} is missing", k));
  const auto it = alias_.find(n.input(k));
  if (it == alias_.end()) {
    if (is_constant(n.input(k))) fail(n, fmt::format("input '{}' is a constant where a computed tensor is expected", n.input(k)));
    fail(n, fmt::format("input '{}' is not computed by any node", n.input(k)));
  }
  return it->second;
}

const OnnxTensor& OnnxImporter::constant(const onnx::NodeProto& n, int k) const {
  if (k >= n.input_size() || n.input(k).empty()) fail(n, fmt::format("input {} is missing", k));
  const auto it = constants_.find(n.input(k));
  if (it == constants_.end())
    fail(n, fmt::format("input '{}' must be an initializer or a Constant (a missing initializer?)", n.input(k)));
  return it->second;
}

const OnnxTensor& OnnxImporter::weight(const onnx::NodeProto& n, int k, const Dims& expected) const {
  const OnnxTensor& t = constant(n, k);
  if (!t.is_float) fail(n, fmt::format("initializer '{}' must be float", n.input(k)));
  if (t.dims != expected)
    fail(n, fmt::format("shapes do not fit: initializer '{}' has dims [{}], expected [{}]", n.input(k),
                        fmt::join(t.dims, ", "), fmt::join(expected, ", ")));
  if (need_weights_ && !t.has_data) fail(n, fmt::format("initializer '{}' has no data", n.input(k)));
  return t;
}

std::string OnnxImporter::layer_name(const onnx::NodeProto& n) {
  // The node's name, so ringtrain export (which names each node after its layer) reads back
  // to the same names; else its output's.
  for (const std::string& name : {n.name(), n.output(0)}) {
    if (!name.empty() && name != Graph::kInputName && dims_.count(name) == 0) return name;
  }
  fail(n, fmt::format("two nodes named '{}'", n.output(0)));
}

void OnnxImporter::push(const onnx::NodeProto& n, std::unique_ptr<Layer> layer, std::vector<std::string> inputs,
                        const onnx::NodeProto* alias) {
  for (int k = 1; k < n.output_size(); ++k) {
    const std::string& out = n.output(k);
    if (!out.empty() && (out == output_ || readers_.count(out) > 0))
      fail(n, fmt::format("output '{}' is read; only the first output of {} is supported", out, n.op_type()));
  }
  std::vector<Dims> in;
  for (const auto& t : inputs) in.push_back(dims_.at(t));
  Dims out;
  try {
    out = layer->out_shape_of(in);
  } catch (const std::invalid_argument& e) {
    fail(n, fmt::format("shapes do not fit: {}", e.what()));
  }
  const std::string name = layer->name();
  dims_[name] = out;
  net_.graph.add(std::move(layer), std::move(inputs));
  alias_[n.output(0)] = name;
  if (alias != nullptr) alias_[alias->output(0)] = name;
}

void OnnxImporter::param(const std::string& layer, const char* suffix, const OnnxTensor& t) {
  if (t.has_data) net_.params[layer + "." + suffix] = t.floats;
}

const onnx::NodeProto* OnnxImporter::sole_reader(const onnx::NodeProto& n) const {
  if (n.output(0) == output_) return nullptr;
  const auto it = readers_.find(n.output(0));
  return it != readers_.end() && it->second.size() == 1 ? it->second[0] : nullptr;
}

void OnnxImporter::only_attributes(const onnx::NodeProto& n, const std::set<std::string>& known) const {
  for (const auto& a : n.attribute())
    if (known.count(a.name()) == 0) fail(n, fmt::format("attribute '{}' is not supported", a.name()));
}

void OnnxImporter::import(const onnx::NodeProto& n) {
  if (fused_.count(&n) > 0) return;
  const std::string& op = n.op_type();
  if (n.output_size() < 1 || n.output(0).empty()) fail(n, "no output");
  try {
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      fail(n, fmt::format("op domain '{}' is not supported (supported: the default domain's {})", n.domain(),
                          supported_onnx_ops()));
    if (op == "Conv") return conv(n);
    if (op == "BatchNormalization") return batchnorm(n);
    if (op == "Relu") return unary(n, std::make_unique<ReLU>(layer_name(n)));
    if (op == "Clip") return clip(n);
    if (op == "Add" || op == "Sum") return add(n);
    if (op == "Concat") return concat(n);
    if (op == "MaxPool" || op == "AveragePool") return pool(n, op == "MaxPool");
    if (op == "GlobalAveragePool") return unary(n, std::make_unique<GlobalAvgPool2d>(layer_name(n)));
    if (op == "Gemm") return gemm(n);
    if (op == "MatMul") return matmul(n);
    if (op == "Flatten") return flatten(n);
    if (op == "Reshape") return reshape(n);
    if (op == "Dropout") return dropout(n);
    if (op == "LRN") return lrn(n);
    if (op == "Constant") return constant_node(n);
    if (op == "Identity") {
      if (n.input_size() != 1) fail(n, "expects one input");
      if (is_constant(n.input(0))) return add_constant(n.output(0), constants_.at(n.input(0)));
      alias_[n.output(0)] = in(n, 0);
      return;
    }
    fail(n, fmt::format("op {} is not supported (supported: {})", op, supported_onnx_ops()));
  } catch (const std::invalid_argument& e) {
    fail(n, e.what());  // a layer's constructor or an attribute of the wrong type
  }
}

void OnnxImporter::unary(const onnx::NodeProto& n, std::unique_ptr<Layer> layer) {
  only_attributes(n, {});
  push(n, std::move(layer), {in(n, 0)});
}

void OnnxImporter::constant_node(const onnx::NodeProto& n) {
  only_attributes(n, {"value", "value_float", "value_floats", "value_int", "value_ints"});
  if (n.attribute_size() != 1) fail(n, "expects exactly one value attribute");
  const onnx::AttributeProto& a = n.attribute(0);
  OnnxTensor t;
  t.has_data = true;
  if (a.name() == "value") {
    t = decode_onnx_tensor(a.t(), fmt::format("{}: node '{}' (Constant)", source_, n.name()));
  } else if (a.name() == "value_float") {
    t.floats = {a.f()};
  } else if (a.name() == "value_floats") {
    t.floats.assign(a.floats().begin(), a.floats().end());
    t.dims = {static_cast<std::int64_t>(t.floats.size())};
  } else {
    t.is_float = false;
    if (a.name() == "value_int") t.ints = {a.i()};
    else t.ints.assign(a.ints().begin(), a.ints().end()), t.dims = {static_cast<std::int64_t>(t.ints.size())};
  }
  add_constant(n.output(0), std::move(t));
}

void OnnxImporter::clip(const onnx::NodeProto& n) {
  only_attributes(n, {"min", "max"});  // attributes before opset 11, inputs since
  double lo = float_attribute(n, "min", -1.0f), hi = float_attribute(n, "max", -1.0f);
  if (n.input_size() > 1 && !n.input(1).empty() && !constant(n, 1).scalar(lo)) fail(n, "min must be a scalar constant");
  if (n.input_size() > 2 && !n.input(2).empty() && !constant(n, 2).scalar(hi)) fail(n, "max must be a scalar constant");
  if (lo != 0.0 || hi != 6.0) fail(n, fmt::format("only Clip(0, 6) (ReLU6) is supported, got min {} max {}", lo, hi));
  push(n, std::make_unique<ReLU6>(layer_name(n)), {in(n, 0)});
}

void OnnxImporter::add(const onnx::NodeProto& n) {
  only_attributes(n, {});
  std::vector<std::string> inputs;
  for (int k = 0; k < n.input_size(); ++k) {
    if (is_constant(n.input(k))) fail(n, "adding a constant is supported only as the bias after a MatMul");
    inputs.push_back(in(n, k));
  }
  if (inputs.size() < 2) fail(n, "expects at least 2 inputs");
  const onnx::NodeProto* relu = sole_reader(n);
  if (relu != nullptr && (relu->op_type() != "Relu" || !relu->domain().empty() || relu->attribute_size() > 0))
    relu = nullptr;
  if (relu != nullptr) fused_.insert(relu);  // one primitive computes both, as the zoo's joins
  const std::size_t count = inputs.size();
  push(n, std::make_unique<Add>(layer_name(n), count, relu != nullptr), std::move(inputs), relu);
}

void OnnxImporter::concat(const onnx::NodeProto& n) {
  only_attributes(n, {"axis"});
  std::vector<std::string> inputs;
  for (int k = 0; k < n.input_size(); ++k) inputs.push_back(in(n, k));
  const auto rank = static_cast<std::int64_t>(dims_.at(inputs.at(0)).size());
  const std::int64_t axis = int_attribute(n, "axis", 1);
  if (axis != 1 && axis != 1 - rank) fail(n, fmt::format("only axis 1 (channels) is supported, got {}", axis));
  const std::size_t count = inputs.size();
  push(n, std::make_unique<Concat>(layer_name(n), count), std::move(inputs));
}

void OnnxImporter::flatten(const onnx::NodeProto& n) {
  only_attributes(n, {"axis"});
  const std::int64_t axis = int_attribute(n, "axis", 1);
  if (axis != 1) fail(n, fmt::format("only axis 1 is supported, got {}", axis));
  push(n, std::make_unique<Flatten>(layer_name(n)), {in(n, 0)});
}

void OnnxImporter::reshape(const onnx::NodeProto& n) {
  only_attributes(n, {"allowzero"});
  const std::string& x = in(n, 0);
  const OnnxTensor& shape = constant(n, 1);
  std::int64_t features = 1;
  const Dims& d = dims_.at(x);
  for (std::size_t i = 1; i < d.size(); ++i) features *= d[i];
  const auto& s = shape.ints;
  // (N, C*H*W) with a free batch: [0 or -1, -1 or C*H*W] (not both -1).
  const bool ok = !shape.is_float && shape.has_data && s.size() == 2 && (s[0] == 0 || s[0] == -1) &&
                  (s[1] == features || (s[1] == -1 && s[0] == 0)) && int_attribute(n, "allowzero", 0) == 0;
  if (!ok) fail(n, fmt::format("only a reshape to (N, {}) is supported (shape [0, -1] or [-1, {}]), got [{}]", features,
                               features, fmt::join(s, ", ")));
  push(n, std::make_unique<Flatten>(layer_name(n)), {x});
}

void OnnxImporter::dropout(const onnx::NodeProto& n) {
  only_attributes(n, {"seed", "ratio"});
  double ratio = float_attribute(n, "ratio", 0.5f);
  if (n.input_size() > 1 && !n.input(1).empty() && !constant(n, 1).scalar(ratio))
    fail(n, "ratio must be a scalar constant");
  if (n.input_size() > 2 && !n.input(2).empty()) constant(n, 2);  // training_mode: a constant, ignored
  if (!(ratio >= 0.0 && ratio < 1.0)) fail(n, fmt::format("ratio must be in [0, 1), got {}", ratio));
  push(n, std::make_unique<Dropout>(layer_name(n), static_cast<float>(ratio)), {in(n, 0)});
}

void OnnxImporter::lrn(const onnx::NodeProto& n) {
  only_attributes(n, {"size", "alpha", "beta", "bias"});
  const std::int64_t size = int_attribute(n, "size", 0);
  if (size <= 0 || size > 255) fail(n, fmt::format("size must be in [1, 255], got {}", size));
  push(n,
       std::make_unique<LocalResponseNorm>(layer_name(n), static_cast<int>(size), float_attribute(n, "alpha", 1e-4f),
                                           float_attribute(n, "beta", 0.75f), float_attribute(n, "bias", 1.0f)),
       {in(n, 0)});
}

}  // namespace ringtrain
