// ModelZoo: the layer sequences of the named models (model_zoo() lists them).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/ImageShape.h"
#include "nn/Layer.h"

namespace ringtrain {

// Layers of zoo model `name` for inputs of shape `input` and `classes` outputs. Throws
// std::invalid_argument for an unknown name or an input the model cannot take.
std::vector<std::unique_ptr<Layer>> build_zoo_layers(const std::string& name, ImageShape input, int classes);

}  // namespace ringtrain
