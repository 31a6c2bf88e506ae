// ModelZoo: the layer graphs of the named models (model_zoo() lists them).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/ImageShape.h"
#include "nn/Graph.h"

namespace ringtrain {

// The layer graph of zoo model `name` for inputs of shape `input` and `classes` outputs, not
// yet finalized. Throws std::invalid_argument for an unknown name or an input the model
// cannot take.
Graph build_zoo_graph(const std::string& name, ImageShape input, int classes);

}  // namespace ringtrain
