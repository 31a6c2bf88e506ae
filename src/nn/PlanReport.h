// PlanReport: what `ringtrain models --plan` prints for one model: the execution order, the
// fusions the graph applied, each tensor's layout, the reorders a training step runs and the
// activation memory the plan holds.
#pragma once

#include <string>

#include "nn/Model.h"

namespace ringtrain {

// oneDNN's name for a layout (nchw, nChw8c, OIhw8i8o, ...), dims a, b, c, ... as n, c, h, w.
std::string layout_name(const dnnl::memory::desc& md);

// The plan of model for training batches of n, as a table then totals.
std::string describe_plan(Model& model, int n);

}  // namespace ringtrain
