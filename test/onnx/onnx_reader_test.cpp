// OnnxReader on the files make_onnx_files.py writes at build time: every supported op maps
// onto its layer with the file's weights; every bad input is one line naming the file, and
// the node and op where one is at fault.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "common/Json.h"
#include "nn/Layer.h"
#include "onnx/OnnxModel.h"
#include "onnx/OnnxReader.h"

using namespace ringtrain;

namespace {

const std::string kFiles = ONNX_TEST_FILES;

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("A file with every supported op reads into the layer graph with its weights") {
  const OnnxNetwork net = read_onnx(kFiles + "/all_ops.onnx");
  CHECK(net.name == "all_ops");
  CHECK(net.input == ImageShape{3, 12, 12});
  CHECK(net.classes == 5);
  CHECK(net.has_batchnorm);
  // MatMul + Add is one linear layer with a bias; Identity and Constant add none; the Relu
  // after the residual Add is fused into it.
  CHECK(net.params.count("matmul.bias") == 1);
  CHECK(net.buffers.at("bn").size() == 16);
  Model model = onnx_model(read_onnx(kFiles + "/all_ops.onnx"));
  const std::string sig = model.signature();
  for (const char* layer : {"conv2d(in=3,out=8,k=3,s=1,p=1,bias=1)", "batchnorm2d(c=8,eps=1e-05,momentum=0.1)",
                            "conv2d(in=8,out=8,k=3,s=1,p=2,d=2,g=8,bias=0)", "relu6", "add(inputs=2,relu=1)",
                            "maxpool2d(k=2,s=2,p=0)", "avgpool2d(k=3,s=2,p=1)", "concat(inputs=2,axis=1)",
                            "lrn(size=3", "add(inputs=3,relu=0)", "globalavgpool2d", "dropout(p=0.25)",
                            "linear(in=288,out=12,bias=0)", "linear(in=12,out=5,bias=1)"}) {
    INFO(layer);
    CHECK(sig.find(layer) != std::string::npos);
  }
  CHECK(model.num_params() == 4309);
  // A forward pass runs (every layer prepared for the shapes the reader inferred).
  std::vector<float> x(2 * 3 * 12 * 12, 0.25f);
  std::vector<std::int32_t> labels{0, 4};
  const LossResult r = model.forward(x.data(), labels.data(), 2, Phase::kEval);
  CHECK(r.count == 2);
  CHECK(std::isfinite(r.loss_sum));
}

TEST_CASE("Every bad input is one line naming the file and what is wrong") {
  const Json cases = Json::parse(read_text(kFiles + "/bad_cases.json"));
  REQUIRE(cases.as_object().size() >= 10);
  for (const auto& [file, expected] : cases.as_object()) {
    const std::string path = kFiles + "/" + file;
    INFO(path);
    std::string message;
    try {
      read_onnx(path);
    } catch (const std::runtime_error& e) {
      message = e.what();
    }
    INFO(message);
    CHECK(message.rfind(path + ": ", 0) == 0);
    CHECK(message.find('\n') == std::string::npos);
    for (const Json& part : expected.as_array()) CHECK(message.find(part.as_string()) != std::string::npos);
  }
}

TEST_CASE("A missing file and a graph without weights are refused by name") {
  CHECK_THROWS_WITH(read_onnx(kFiles + "/no_such.onnx"), Catch::Contains("no_such.onnx: cannot read"));
  Json meta = Json::object();
  meta.set("model", "onnx:x");
  meta.set("model_graph", "not base64!");
  CHECK_THROWS_WITH(checkpoint_model(meta, {3, 12, 12}, 5, "ck.rtck"), Catch::Contains("ck.rtck: meta: key 'model_graph'"));
}
