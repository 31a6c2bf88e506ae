// OnnxReader: the file, its model and graph checked (opset, one float 4-D input, one output),
// the nodes put in topological order (Kahn, ties in file order), then mapped by OnnxImporter.
#include "onnx/OnnxReader.h"

#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "onnx/OnnxImporter.h"

namespace ringtrain {
namespace {

constexpr std::int64_t kMinOpset = 13, kMaxOpset = 17;

void check_opset(const onnx::ModelProto& m, const std::string& source) {
  std::int64_t version = -1;
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") version = o.version();
  if (version < kMinOpset || version > kMaxOpset)
    throw std::runtime_error(fmt::format("{}: opset {} (supported: {} to {}, as torch.onnx.export writes with "
                                         "opset_version 13-17)",
                                         source, version < 0 ? std::string("missing") : std::to_string(version),
                                         kMinOpset, kMaxOpset));
}

// The graph's one input that no initializer gives: (N, C, H, W) float with C, H, W fixed.
const onnx::ValueInfoProto& graph_input(const onnx::GraphProto& g, const std::set<std::string>& initializers,
                                        const std::string& source, ImageShape& shape) {
  const onnx::ValueInfoProto* input = nullptr;
  for (const auto& v : g.input()) {
    if (initializers.count(v.name()) > 0) continue;
    if (input != nullptr)
      throw std::runtime_error(fmt::format("{}: several graph inputs ('{}', '{}'); one image input is supported",
                                           source, input->name(), v.name()));
    input = &v;
  }
  if (input == nullptr) throw std::runtime_error(fmt::format("{}: the graph has no input", source));
  const auto& type = input->type().tensor_type();
  const auto& dims = type.shape().dim();
  bool ok = input->type().has_tensor_type() && type.elem_type() == onnx::TensorProto::FLOAT && dims.size() == 4;
  for (int i = 1; ok && i < 4; ++i) ok = dims[i].has_dim_value() && dims[i].dim_value() > 0 && dims[i].dim_value() < 65536;
  if (!ok)
    throw std::runtime_error(fmt::format("{}: input '{}' must be float (N, C, H, W) with fixed C, H, W", source,
                                         input->name()));
  shape = {static_cast<int>(dims[1].dim_value()), static_cast<int>(dims[2].dim_value()),
           static_cast<int>(dims[3].dim_value())};
  return *input;
}

// Kahn's sort over the values the nodes read and write; a node left over sits on a cycle or
// reads something nothing gives.
std::vector<const onnx::NodeProto*> sorted_nodes(const onnx::GraphProto& g, std::set<std::string> available,
                                                 const std::string& source) {
  std::map<std::string, const onnx::NodeProto*> producer;
  for (const auto& n : g.node())
    for (const auto& out : n.output())
      if (!out.empty() && !producer.emplace(out, &n).second)
        throw std::runtime_error(fmt::format("{}: node '{}' ({}): tensor '{}' is written twice", source, n.name(),
                                             n.op_type(), out));
  std::vector<const onnx::NodeProto*> order;
  std::vector<bool> done(static_cast<std::size_t>(g.node_size()), false);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int i = 0; i < g.node_size(); ++i) {
      if (done[static_cast<std::size_t>(i)]) continue;
      const onnx::NodeProto& n = g.node(i);
      bool ready = true;
      for (const auto& in : n.input()) ready = ready && (in.empty() || available.count(in) > 0);
      if (!ready) continue;
      done[static_cast<std::size_t>(i)] = true;
      order.push_back(&n);
      for (const auto& out : n.output()) available.insert(out);
      progress = true;
      break;  // ties in file order: rescan from the first node
    }
  }
  for (int i = 0; i < g.node_size(); ++i) {
    if (done[static_cast<std::size_t>(i)]) continue;
    const onnx::NodeProto& n = g.node(i);
    for (const auto& in : n.input()) {
      if (in.empty() || available.count(in) > 0) continue;
      if (producer.count(in) == 0)
        throw std::runtime_error(fmt::format("{}: node '{}' ({}): input '{}' is no initializer, graph input or node "
                                             "output (a missing initializer?)",
                                             source, n.name(), n.op_type(), in));
    }
    throw std::runtime_error(fmt::format("{}: node '{}' ({}): the graph has a cycle through this node", source,
                                         n.name(), n.op_type()));
  }
  return order;
}

}  // namespace

const std::string& supported_onnx_ops() {
  static const std::string ops =
      "Conv, BatchNormalization, Relu, Clip(0, 6), Add, Sum, Concat, MaxPool, AveragePool, GlobalAveragePool, Gemm, "
      "MatMul(+Add), Flatten, Reshape to 2-D, Dropout, LRN, Identity, Constant";
  return ops;
}

OnnxNetwork parse_onnx(const std::string& bytes, const std::string& source, bool need_weights) {
  onnx::ModelProto m;
  if (bytes.size() > kMaxOnnxBytes)
    throw std::runtime_error(fmt::format("{}: {} bytes, over protobuf's limit of {} for one ONNX message", source,
                                         bytes.size(), kMaxOnnxBytes));
  if (!m.ParseFromString(bytes) || !m.has_graph())
    throw std::runtime_error(fmt::format("{}: not an ONNX model (truncated, or not protobuf)", source));
  check_opset(m, source);
  const onnx::GraphProto& g = m.graph();
  OnnxNetwork net;
  net.name = g.name();
  std::set<std::string> initializers;
  for (const auto& t : g.initializer()) initializers.insert(t.name());
  const onnx::ValueInfoProto& input = graph_input(g, initializers, source, net.input);
  if (g.output_size() != 1)
    throw std::runtime_error(fmt::format("{}: {} graph outputs; one (the logits) is supported", source, g.output_size()));
  const std::string& output = g.output(0).name();

  OnnxImporter importer(source, need_weights, input.name(), {1, net.input.channels, net.input.height, net.input.width},
                        net);
  for (const auto& t : g.initializer())
    importer.add_constant(t.name(), decode_onnx_tensor(t, fmt::format("{}: initializer '{}'", source, t.name())));
  std::set<std::string> available = initializers;
  available.insert(input.name());
  const auto order = sorted_nodes(g, available, source);
  std::map<std::string, std::vector<const onnx::NodeProto*>> readers;
  for (const auto* n : order)
    for (const auto& in : n->input())
      if (!in.empty()) readers[in].push_back(n);
  importer.set_readers(std::move(readers));
  importer.set_output(output);
  for (const auto* n : order) importer.import(*n);

  const std::string& last = importer.tensor(output);
  const Dims& out = importer.dims(last);
  if (last == Graph::kInputName || out.size() != 2 || out[1] < 2)
    throw std::runtime_error(fmt::format("{}: output '{}' must be (N, classes) logits with at least 2 classes", source,
                                         output));
  net.classes = static_cast<int>(out[1]);
  return net;
}

OnnxNetwork read_onnx(const std::filesystem::path& file) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(file, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: cannot read the ONNX file ({})", file.string(), ec.message()));
  if (size > kMaxOnnxBytes)
    throw std::runtime_error(fmt::format("{}: {} bytes, over protobuf's limit of {} for one ONNX message",
                                         file.string(), size, kMaxOnnxBytes));
  std::ifstream f(file, std::ios::binary);
  std::string bytes(static_cast<std::size_t>(size), '\0');
  if (!f || !f.read(bytes.data(), static_cast<std::streamsize>(size)))
    throw std::runtime_error(fmt::format("{}: cannot read the ONNX file", file.string()));
  OnnxNetwork net = parse_onnx(bytes, file.string(), true);
  net.name = file.stem().string();  // what the user calls it; exporters name graphs "main_graph" and the like
  return net;
}

}  // namespace ringtrain
