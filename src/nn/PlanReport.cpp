// PlanReport: the plan table (one line per node) and its totals.
#include "nn/PlanReport.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "nn/Add.h"
#include "nn/Graph.h"
#include "nn/GraphPlan.h"
#include "nn/Layer.h"

namespace ringtrain {

using dnnl::memory;

std::string layout_name(const memory::desc& md) {
  const auto& d = md.data;
  if (d.format_kind != dnnl_blocked) return "any";
  const int nd = d.ndims;
  const auto& blk = d.format_desc.blocking;
  static const char kActivation[] = "nchw", kPlain[] = "abcde";
  const char* letters = nd == 4 ? kActivation : kPlain;
  // Outer dims by decreasing stride (ties keep the dim order), uppercase when also blocked.
  std::vector<int> order(static_cast<std::size_t>(nd));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return blk.strides[a] > blk.strides[b]; });
  std::string name;
  for (const int a : order) {
    bool blocked = false;
    for (int k = 0; k < blk.inner_nblks; ++k) blocked = blocked || blk.inner_idxs[k] == a;
    const char c = letters[a];
    name += blocked ? static_cast<char>(c - 'a' + 'A') : c;
  }
  for (int k = 0; k < blk.inner_nblks; ++k) name += fmt::format("{}{}", blk.inner_blks[k], letters[blk.inner_idxs[k]]);
  return name;
}

namespace {

std::string mib(std::size_t bytes) { return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1 << 20)); }

// The note of node i: what fused into it or where it runs, and the reorders into it.
std::string node_note(const Graph& g, const GraphPlan& plan, std::size_t i) {
  std::string note;
  const Layer& layer = g.layer(i);
  if (const int into = g.fused_into(i); into >= 0)
    note += fmt::format("runs in {}{}", g.layer(static_cast<std::size_t>(into)).name(),
                        layer.needs_dst_in_backward() ? " (backward here, from dst)" : "");
  if (layer.relu_post_op())
    note += layer.relu_fusion() == ReluFusion::kBoth ? "+relu (fuse_norm_relu)" : "+relu (post-op)";
  if (const auto* add = dynamic_cast<const Add*>(&layer); add && add->fused_relu()) note += "+relu (post-op)";
  const Layer::StepReorders r = layer.step_reorders();
  const int in = plan.input_reorders(i), back = plan.diff_reorders(i);
  if (in + back + r.activations + r.weights > 0)
    note += fmt::format("{}reorders: {} in, {} diff in, {} inside, {} weights", note.empty() ? "" : "; ", in, back,
                        r.activations, r.weights);
  return note;
}

}  // namespace

std::string describe_plan(Model& model, int n) {
  const GraphPlan& plan = model.plan(n, Phase::kTrain);
  const PlanStats st = plan.stats();  // selects each layer's training state (step_reorders)
  const Graph& g = model.graph();
  std::string out = fmt::format("plan {} input {} batch {} train {}, fusions {}\n", model.name(),
                                model.input_shape().str(), n, precision_name(model.precision()),
                                g.fusions() ? "on" : "off");
  out += fmt::format("{:>4} {:<18} {:<12} {:>14} {:<10} {}\n", "#", "layer", "kind", "output", "layout", "notes");
  int bn_relu = 0, conv_relu = 0, add_relu = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const Layer& layer = g.layer(i);
    const Dims& shape = g.shape(Graph::output_of(i));
    out += fmt::format("{:>4} {:<18} {:<12} {:>14} {:<10} {}\n", i, layer.name(), layer.kind(),
                       dims_str(Dims(shape.begin() + 1, shape.end())),
                       layout_name(plan.value_md(Graph::output_of(i))), node_note(g, plan, i));
    if (layer.relu_post_op()) ++(layer.relu_fusion() == ReluFusion::kBoth ? bn_relu : conv_relu);
    if (const auto* add = dynamic_cast<const Add*>(&layer); add && add->fused_relu()) ++add_relu;
  }
  out += fmt::format("fused: {} batch norm + ReLU, {} convolution + ReLU, {} add + ReLU\n", bn_relu, conv_relu,
                     add_relu);
  out += fmt::format(
      "reorders per step: {} between layers forward, {} backward, {} inside layers, {} of weights; {} same-layout "
      "copies, {} gradient sums ({} reading an add's gradient where it lies, no copy)\n",
      st.forward_reorders, st.backward_reorders, st.layer_reorders, st.weight_reorders, st.copies, st.gradient_sums,
      st.shared_gradients);
  out += fmt::format(
      "memory: activations and gradients {} in a buffer each, {} planned by liveness; layers' own state {}\n",
      mib(st.separate_bytes), mib(st.planned_bytes), mib(st.layer_bytes));
  return out;
}

}  // namespace ringtrain
