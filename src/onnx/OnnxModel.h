// A Model from an ONNX network, and the graph a checkpoint carries so that eval, inspect,
// export and resume can rebuild the model without the file it was read from.
#pragma once

#include <filesystem>
#include <string>

#include "common/ImageShape.h"
#include "common/Json.h"
#include "nn/Model.h"
#include "onnx/OnnxReader.h"

namespace ringtrain {

// Models read from ONNX are named "onnx:<file stem>", so no zoo name is ever taken for one.
inline constexpr const char* kOnnxModelPrefix = "onnx:";
bool is_onnx_model_name(const std::string& name);

// net's graph as a Model named "onnx:<net.name>"; its parameters and running statistics are
// net's when it carries them (else Model::init(0)'s).
Model onnx_model(OnnxNetwork net);

// model's graph without weights as ONNX bytes in base64: a checkpoint's "model_graph".
std::string checkpoint_graph(const Model& model);

// The model a checkpoint's meta names, parameters not loaded: a zoo model, or "onnx:..." built
// from meta's model_graph. Throws std::runtime_error naming source for a graph it cannot read.
Model checkpoint_model(const Json& meta, ImageShape input, int classes, const std::string& source);

}  // namespace ringtrain
