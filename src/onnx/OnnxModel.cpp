// A Model from an ONNX network; a checkpoint's graph.
#include "onnx/OnnxModel.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "common/Base64.h"
#include "export/OnnxExport.h"
#include "nn/Layer.h"

namespace ringtrain {

bool is_onnx_model_name(const std::string& name) { return name.rfind(kOnnxModelPrefix, 0) == 0; }

Model onnx_model(OnnxNetwork net) {
  std::map<std::string, std::vector<float>> params = std::move(net.params), buffers = std::move(net.buffers);
  // A graph ringtrain exported is named after its model, prefix included: not doubled.
  const std::string name = is_onnx_model_name(net.name) ? net.name : kOnnxModelPrefix + net.name;
  Model model(name, std::move(net.graph), net.input, net.classes);
  model.init(0);
  if (!params.empty()) {
    auto dst = model.params();
    for (const ParamInfo& p : model.param_infos()) {
      const auto it = params.find(p.name);
      // The importer stores every parameter of a file with weights, sized by the same dims.
      if (it == params.end() || it->second.size() != p.count)
        throw std::logic_error(fmt::format("model {}: no weights for {}", model.name(), p.name));
      std::copy(it->second.begin(), it->second.end(), dst.begin() + static_cast<std::ptrdiff_t>(p.offset));
    }
  }
  const auto arena = model.buffers();
  for (std::size_t i = 0; i < model.num_layers(); ++i) {
    const Layer& layer = model.layer(i);
    const auto it = buffers.find(layer.name());
    if (it == buffers.end() || layer.num_buffers() != it->second.size()) continue;
    std::copy(it->second.begin(), it->second.end(), arena.begin() + (layer.buffer_data() - arena.data()));
  }
  return model;
}

std::string checkpoint_graph(const Model& model) { return base64_encode(onnx_bytes(model, false)); }

Model checkpoint_model(const Json& meta, ImageShape input, int classes, const std::string& source) {
  const std::string& name = meta.at("model").as_string();
  if (!is_onnx_model_name(name)) return Model(name, input, classes);
  const Json* graph = meta.find("model_graph");
  const std::optional<std::string> bytes =
      graph != nullptr && graph->is_string() ? base64_decode(graph->as_string()) : std::nullopt;
  if (!bytes) throw std::runtime_error(fmt::format("{}: meta: key 'model_graph': expected the model's graph in base64", source));
  OnnxNetwork net = parse_onnx(*bytes, source + " (its model_graph)", false);
  net.name = name.substr(std::string(kOnnxModelPrefix).size());
  net.params.clear();
  net.buffers.clear();
  return onnx_model(std::move(net));
}

}  // namespace ringtrain
