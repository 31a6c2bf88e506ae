// Export -> import -> export for every zoo model (small inputs): the imported model has the
// zoo model's parameters and running statistics bit for bit and the same layers, and its
// export is byte-identical to the export of its own re-import.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "export/OnnxExport.h"
#include "nn/Layer.h"
#include "nn/Model.h"
#include "onnx/OnnxModel.h"
#include "onnx/OnnxReader.h"

using namespace ringtrain;

namespace {

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// The signature without its first line (which names the model).
std::string layers_of(const Model& m) {
  const std::string s = m.signature();
  return s.substr(s.find('\n') + 1);
}

// Non-default running statistics, so that keeping them is tested.
void perturb_buffers(Model& m) {
  auto b = m.buffers();
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = 0.5f + 0.001f * static_cast<float>(i % 97);
}

}  // namespace

TEST_CASE("Every zoo model survives export, import and export with its bits") {
  for (const auto& entry : model_zoo()) {
    // The smallest input each model takes, so the big ones stay fast.
    ImageShape shape{3, 32, 32};
    if (entry.name == "logreg" || entry.name == "mlp" || entry.name == "resnet20" || entry.name == "resnet56")
      shape = {1, 8, 8};
    if (entry.name == "lenet5") shape = {1, 28, 28};
    if (entry.name == "svhn-cnn") shape = {3, 16, 16};
    INFO("model " << entry.name << " at " << shape.str());
    Model zoo(entry.name, shape, 10);
    zoo.init(11);
    perturb_buffers(zoo);
    const std::string first = onnx_bytes(zoo, true);
    Model imported = onnx_model(parse_onnx(first, entry.name + ".onnx"));
    CHECK(same_bits(std::as_const(imported).params(), std::as_const(zoo).params()));
    CHECK(same_bits(std::as_const(imported).buffers(), std::as_const(zoo).buffers()));
    CHECK(layers_of(imported) == layers_of(zoo));
    const std::string second = onnx_bytes(imported, true);
    Model again = onnx_model(parse_onnx(second, entry.name + "-2.onnx"));
    CHECK(onnx_bytes(again, true) == second);
    // The weightless graph a checkpoint carries rebuilds the same layers.
    Json meta = Json::object();
    meta.set("model", imported.name());
    meta.set("model_graph", checkpoint_graph(imported));
    const Model rebuilt = checkpoint_model(meta, shape, 10, "meta");
    CHECK(rebuilt.signature() == imported.signature());
  }
}
