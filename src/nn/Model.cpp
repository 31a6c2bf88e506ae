// Model: the zoo's layer graph over flat parameter / gradient / buffer arenas, with one cached
// execution plan (GraphPlan: activation memories and reorders) per (batch size, phase).
#include "nn/Model.h"

#include <cmath>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "common/Random.h"
#include "common/VectorState.h"
#include "nn/DnnlContext.h"
#include "nn/GraphPlan.h"
#include "nn/Layer.h"
#include "nn/ModelZoo.h"
#include "nn/SoftmaxCrossEntropy.h"
#include "nn/Tensor.h"

namespace ringtrain {

struct Model::Impl {
  std::string name;
  ImageShape input;
  int classes = 0;
  Graph graph;
  Tensor params, grads, buffers;
  std::vector<ParamInfo> infos;
  std::vector<std::int64_t> fan_ins;                        // per info
  std::vector<std::pair<std::size_t, std::size_t>> ranges;  // per layer: arena offset, count
  SoftmaxCrossEntropy loss;
  std::vector<std::unique_ptr<GraphPlan>> plans;  // one per (batch size, phase)
  GraphPlan* last = nullptr;                      // plan of the last forward
  bool can_backward = false;
  bool share_memory = true;
  Precision precision = Precision::kFp32;
  // Whether the parameters may have changed (ParamsSpan, init()): the layers' weight copies
  // (bf16, blocked layouts) are converted once per change.
  ParamsVersion params_version;

  GraphPlan& plan_for(int n, Phase phase) {
    for (auto& p : plans)
      if (p->n() == n && p->phase() == phase) return *p;
    plans.push_back(std::make_unique<GraphPlan>(graph, n, phase, share_memory));
    return *plans.back();
  }
  void layout_arenas();
};

Model::Model(const std::string& name, ImageShape input, int classes)
    : Model(name, build_zoo_graph(name, input, classes), input, classes) {}

Model::Model(const std::string& name, Graph graph, ImageShape input, int classes) : impl_(std::make_unique<Impl>()) {
  auto& m = *impl_;
  m.name = name;
  m.input = input;
  m.classes = classes;
  m.graph = std::move(graph);
  m.graph.finalize({1, input.channels, input.height, input.width});
  const Dims& out = m.graph.shape(m.graph.output());
  if (out != Dims{1, classes})
    throw std::invalid_argument(fmt::format("model {}: ends in shape {}, expected (1, {})", name, dims_str(out), classes));
  m.layout_arenas();
  init(0);
}

// Arena layout: layers in reverse topological order (the order backward finishes them), each
// layer's tensors in its own order; buffers in forward order.
void Model::Impl::layout_arenas() {
  const std::size_t L = graph.size();
  std::size_t total = 0, total_buffers = 0;
  ranges.assign(L, {0, 0});
  for (std::size_t i = L; i-- > 0;) {
    const std::size_t start = total;
    for (const auto& spec : graph.layer(i).param_specs()) {
      infos.push_back({graph.layer(i).name() + "." + spec.suffix, total, numel(spec.dims), spec.kind,
                       static_cast<int>(i)});
      fan_ins.push_back(spec.fan_in);
      total += numel(spec.dims);
    }
    ranges[i] = {start, total - start};
  }
  for (std::size_t i = 0; i < L; ++i) total_buffers += graph.layer(i).num_buffers();
  params = Tensor(Dims{static_cast<std::int64_t>(total)});
  grads = Tensor(Dims{static_cast<std::int64_t>(total)});
  buffers = Tensor(Dims{static_cast<std::int64_t>(total_buffers)});

  std::size_t info = 0, buffer_offset = 0;
  std::vector<std::vector<Tensor>> layer_params(L), layer_grads(L);
  for (std::size_t i = L; i-- > 0;) {
    for (const auto& spec : graph.layer(i).param_specs()) {
      const std::size_t off = infos[info++].offset;
      layer_params[i].push_back(Tensor::view(params.data() + off, spec.dims));
      layer_grads[i].push_back(Tensor::view(grads.data() + off, spec.dims));
    }
  }
  for (std::size_t i = 0; i < L; ++i) {
    graph.layer(i).bind_params(std::move(layer_params[i]), std::move(layer_grads[i]), &params_version);
    graph.layer(i).bind_buffers(buffers.data() + buffer_offset);
    buffer_offset += graph.layer(i).num_buffers();
  }
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

void Model::init(std::uint64_t seed) {
  auto& m = *impl_;
  // The weight layer nearest the loss feeds softmax, not a ReLU: gain 1 instead of sqrt(2).
  const int last_weight_layer = m.infos.empty() ? -1 : m.infos.front().layer;
  for (std::size_t k = 0; k < m.infos.size(); ++k) {
    const ParamInfo& p = m.infos[k];
    float* w = m.params.data() + p.offset;
    switch (p.kind) {
      case ParamKind::kWeight: {
        // He et al. 2015 (Kaiming) uniform: U(-b, b), b = gain * sqrt(3 / fan_in), gain sqrt(2)
        // for ReLU, giving Var = 2 / fan_in. (PyTorch's default uses a = sqrt(5), i.e.
        // b = 1 / sqrt(fan_in); we follow the paper, as the model's header promises.)
        const double gain = p.layer == last_weight_layer ? 1.0 : std::sqrt(2.0);
        const auto bound = static_cast<float>(gain * std::sqrt(3.0 / static_cast<double>(m.fan_ins[k])));
        Rng rng(derive_seed(seed, {static_cast<std::uint64_t>(RngPurpose::kInit), k}));
        for (std::size_t j = 0; j < p.count; ++j) w[j] = rng.uniform(-bound, bound);
        break;
      }
      case ParamKind::kNormScale:
        std::fill(w, w + p.count, 1.0f);
        break;
      case ParamKind::kBias:
      case ParamKind::kNormShift:
        std::fill(w, w + p.count, 0.0f);
        break;
    }
  }
  for (std::size_t i = 0; i < m.graph.size(); ++i) m.graph.layer(i).reset_buffers();
  ++m.params_version.value;
}

void Model::set_precision(Precision precision) {
  auto& m = *impl_;
  m.plans.clear();
  m.last = nullptr;
  m.can_backward = false;
  m.precision = precision;
  for (std::size_t i = 0; i < m.graph.size(); ++i) m.graph.layer(i).set_compute_type(compute_type(precision));
}

Precision Model::precision() const noexcept { return impl_->precision; }

void Model::set_fusions(bool on) {
  auto& m = *impl_;
  m.plans.clear();
  m.last = nullptr;
  m.can_backward = false;
  m.graph.set_fusions(on);
}

void Model::set_memory_planning(bool on) {
  auto& m = *impl_;
  m.plans.clear();
  m.last = nullptr;
  m.can_backward = false;
  m.share_memory = on;
}

const std::string& Model::name() const noexcept { return impl_->name; }
ImageShape Model::input_shape() const noexcept { return impl_->input; }
int Model::classes() const noexcept { return impl_->classes; }
ParamsSpan Model::params() noexcept { return {impl_->params.span(), impl_->params_version}; }
void Model::params_updated(std::size_t offset, std::size_t count) {
  auto& m = *impl_;
  if (m.precision != Precision::kBf16) return;
  const float* begin = m.params.data() + offset;
  for (std::size_t i = 0; i < m.graph.size(); ++i) {
    const auto [start, n] = m.ranges[i];
    if (start < offset + count && offset < start + n) m.graph.layer(i).params_updated(begin, begin + count);
  }
}
std::span<float> Model::grads() noexcept { return impl_->grads.span(); }
std::span<float> Model::buffers() noexcept { return impl_->buffers.span(); }
std::span<const float> Model::params() const noexcept { return impl_->params.span(); }
std::span<const float> Model::buffers() const noexcept { return impl_->buffers.span(); }
std::size_t Model::num_params() const noexcept { return impl_->params.numel(); }
const std::vector<ParamInfo>& Model::param_infos() const noexcept { return impl_->infos; }

std::string Model::signature() const {
  const auto& m = *impl_;
  const Graph& g = m.graph;
  auto dims = [&](int v) { return dims_str(Dims(g.shape(v).begin() + 1, g.shape(v).end())); };
  std::string s =
      fmt::format("model {} input {} classes {} params {}\n", m.name, m.input.str(), m.classes, m.params.numel());
  for (std::size_t i = 0; i < g.size(); ++i) {
    const auto& inputs = g.node(i).inputs;
    s += fmt::format("{} {} {} {} -> {}", i, g.layer(i).name(), g.layer(i).describe(), dims(inputs[0]),
                     dims(Graph::output_of(i)));
    // A chain's lines are as they were before models were graphs; other nodes name their inputs.
    if (!g.is_chain_link(i)) {
      s += " <-";
      for (std::size_t k = 0; k < inputs.size(); ++k) s += (k ? "," : " ") + g.value_name(inputs[k]);
    }
    s += "\n";
  }
  return s;
}

std::size_t Model::num_layers() const noexcept { return impl_->graph.size(); }

const Layer& Model::layer(std::size_t i) const { return impl_->graph.layer(i); }

Dims Model::layer_input_dims(std::size_t i) const { return impl_->graph.shape(impl_->graph.node(i).inputs.at(0)); }

const Graph& Model::graph() const noexcept { return impl_->graph; }

const GraphPlan& Model::plan(int n, Phase phase) {
  if (n <= 0) throw std::invalid_argument(fmt::format("model {}: a plan for batches of {}", impl_->name, n));
  return impl_->plan_for(n, phase);
}

double Model::flops_per_image() const {
  const Graph& g = impl_->graph;
  double f = 0.0;
  for (std::size_t i = 0; i < g.size(); ++i) f += g.layer(i).flops_per_image(g.shape(g.node(i).inputs[0]));
  return f;
}

LossResult Model::forward(const float* src, const std::int32_t* labels, int n, Phase phase, std::uint64_t noise_seed) {
  auto& m = *impl_;
  if (n <= 0) throw std::invalid_argument(fmt::format("model {}: forward of an empty batch", m.name));
  GraphPlan& p = m.plan_for(n, phase);
  p.forward(src, noise_seed);
  DnnlContext::get().stream().wait();
  clear_upper_vector_state();  // the loss and the caller's code may be baseline SSE (see backward)
  m.last = &p;
  m.can_backward = phase == Phase::kTrain;
  return m.loss.forward(p.logits(), labels, n, m.classes);
}

void Model::backward(const GradReadyFn& on_ready) {
  auto& m = *impl_;
  if (!m.can_backward) throw std::logic_error(fmt::format("model {}: backward without a train-phase forward", m.name));
  m.loss.backward(m.last->diff_logits());
  m.last->backward(m.ranges, on_ready);
  DnnlContext::get().stream().wait();
  // oneDNN 2.6.3's bf16 inner-product backward returns with the upper halves of the vector
  // registers in use (XINUSE after mlp's backward), and the optimizer's loop, compiled for the
  // x86-64 baseline, then ran 3.6x slower: 11.6 vs 3.2 ms per SGD step over mlp's 3.8 M
  // parameters, 3.9 ms with VZEROUPPER first (one thread, momentum 0.9, 160 steps).
  clear_upper_vector_state();
  m.can_backward = false;
}

std::span<const float> Model::logits() const noexcept {
  const auto& m = *impl_;
  if (!m.last) return {};
  return {m.last->logits(), static_cast<std::size_t>(m.last->n()) * static_cast<std::size_t>(m.classes)};
}

}  // namespace ringtrain
