// GraphPlan: building and running one (batch size, phase)'s memories over a Graph.
#include "nn/GraphPlan.h"

#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "common/Random.h"
#include "common/VectorState.h"
#include "nn/DnnlContext.h"

namespace ringtrain {

using dnnl::memory;

GraphPlan::GraphPlan(const Graph& graph, int n, Phase phase) : graph_(graph), n_(n), phase_(phase) {
  build_forward();
  if (phase == Phase::kTrain) build_backward();
}

std::vector<memory::desc> GraphPlan::input_mds(std::size_t i) const {
  std::vector<memory::desc> mds;
  for (const int v : graph_.node(i).inputs) mds.push_back(value_[static_cast<std::size_t>(v)].get_desc());
  return mds;
}

void GraphPlan::build_forward() {
  auto& eng = DnnlContext::get().engine();
  const std::size_t nodes = graph_.size();
  Dims in = graph_.shape(Graph::kInput);
  in[0] = n_;
  input_ = memory(plain_md(in), eng, DNNL_MEMORY_NONE);
  value_.assign(nodes + 1, memory());
  value_[0] = input_;
  cons_.assign(nodes, {});
  copy_.assign(nodes, {});
  for (std::size_t i = 0; i < nodes; ++i) {
    Layer& layer = graph_.layer(i);
    const auto& inputs = graph_.node(i).inputs;
    layer.prepare_inputs(input_mds(i), phase_, graph_.need_diff_src(i));
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      const memory& v = value_[static_cast<std::size_t>(inputs[k])];
      // The user's input is always copied in (reordered if the layer wants another layout),
      // so no layer ever writes into the caller's buffer.
      if (inputs[k] == Graph::kInput || layer.input_md(k) != v.get_desc()) {
        cons_[i].emplace_back(layer.input_md(k), eng);
        copy_[i].emplace_back(v, cons_[i].back());
      } else {
        cons_[i].push_back(v);
        copy_[i].emplace_back();
      }
    }
    // In place only if that destroys nothing anyone needs: the input is this node's private
    // copy, or this node is its only reader and its producer does not read its dst in backward.
    bool in_place = inputs.size() == 1 && layer.in_place() && layer.dst_md().get_size() == layer.src_md().get_size();
    if (in_place && !copy_[i][0]) {
      const int v = inputs[0];
      in_place = graph_.readers(v).size() == 1 && !graph_.layer(static_cast<std::size_t>(v - 1)).needs_dst_in_backward();
    }
    value_[i + 1] =
        in_place ? memory(layer.dst_md(), eng, cons_[i][0].get_data_handle()) : memory(layer.dst_md(), eng);
  }
  const memory::desc logits_md = plain_md({n_, graph_.shape(graph_.output())[1]});
  const memory& out = value_.back();
  if (out.get_desc() == logits_md) {
    logits_ = out;
  } else {
    logits_ = memory(logits_md, eng);
    logits_copy_ = dnnl::reorder(out, logits_);
  }
}

void GraphPlan::add_gradient_slot(std::size_t i, std::size_t k) {
  auto& eng = DnnlContext::get().engine();
  Layer& layer = graph_.layer(i);
  const int v = graph_.node(i).inputs[k];
  memory& dv = dvalue_[static_cast<std::size_t>(v)];
  const memory::desc& md = layer.diff_input_md(k);
  const auto& readers = graph_.readers(v);
  const bool first = readers.back().node == static_cast<int>(i) && readers.back().slot == static_cast<int>(k);
  if (first) {
    // The only reader of a single-input in-place layer may write over its own diff_dst.
    const bool in_place = readers.size() == 1 && graph_.node(i).inputs.size() == 1 && layer.in_place() &&
                          md.get_size() == layer.diff_dst_md().get_size();
    dv = in_place ? memory(md, eng, dcons_[i].get_data_handle()) : memory(md, eng);
    dsrc_[i][k] = dv;
    return;
  }
  if (!dv) throw std::logic_error(fmt::format("{}: gradient of '{}' added before it was written", layer.name(),
                                              graph_.value_name(v)));
  dsrc_[i][k] = memory(md, eng);
  const std::vector<float> scales{1.f, 1.f};
  accumulate_[i][k] = dnnl::sum(dnnl::sum::primitive_desc(dv.get_desc(), scales, {dv.get_desc(), md}, eng));
}

void GraphPlan::build_backward() {
  auto& eng = DnnlContext::get().engine();
  const std::size_t nodes = graph_.size();
  dvalue_.assign(nodes + 1, memory());
  dcons_.assign(nodes, memory());
  dcopy_.assign(nodes, dnnl::reorder());
  dsrc_.assign(nodes, {});
  accumulate_.assign(nodes, {});
  diff_logits_ = memory(logits_.get_desc(), eng);
  dvalue_.back() = diff_logits_;
  for (std::size_t i = nodes; i-- > 0;) {
    const std::size_t slots = graph_.node(i).inputs.size();
    dsrc_[i].assign(slots, memory());
    accumulate_[i].assign(slots, dnnl::sum());
    if (!graph_.runs_backward(i)) continue;
    Layer& layer = graph_.layer(i);
    layer.prepare_inputs(input_mds(i), Phase::kTrain, graph_.need_diff_src(i));
    const memory& dout = dvalue_[i + 1];
    if (layer.diff_dst_md() == dout.get_desc()) {
      dcons_[i] = dout;
    } else {
      dcons_[i] = memory(layer.diff_dst_md(), eng);
      dcopy_[i] = dnnl::reorder(dout, dcons_[i]);
    }
    // Slots in reverse, so that of a node reading one tensor twice the later slot writes first.
    for (std::size_t k = slots; k-- > 0;)
      if (graph_.needs_grad(graph_.node(i).inputs[k])) add_gradient_slot(i, k);
  }
}

void GraphPlan::forward(const float* src, std::uint64_t noise_seed) {
  auto& strm = DnnlContext::get().stream();
  input_.set_data_handle(const_cast<float*>(src));  // only ever read (copied into cons)
  for (std::size_t i = 0; i < graph_.size(); ++i) {
    for (std::size_t k = 0; k < cons_[i].size(); ++k)
      if (copy_[i][k]) copy_[i][k].execute(strm, value_[static_cast<std::size_t>(graph_.node(i).inputs[k])], cons_[i][k]);
    Layer& layer = graph_.layer(i);
    layer.prepare_inputs(input_mds(i), phase_, graph_.need_diff_src(i));  // selects this plan's state
    const std::uint64_t seed = derive_seed(noise_seed, {static_cast<std::uint64_t>(RngPurpose::kDropout), i});
    layer.forward_inputs(cons_[i], value_[i + 1], phase_, seed);
  }
  if (logits_copy_) logits_copy_.execute(strm, value_.back(), logits_);
}

void GraphPlan::backward(const std::vector<std::pair<std::size_t, std::size_t>>& ranges,
                         const GradReadyFn& on_ready) {
  if (phase_ != Phase::kTrain) throw std::logic_error("GraphPlan: backward of an eval plan");
  auto& strm = DnnlContext::get().stream();
  for (std::size_t i = graph_.size(); i-- > 0;) {
    if (!graph_.runs_backward(i)) continue;  // nothing upstream has parameters
    if (dcopy_[i]) dcopy_[i].execute(strm, dvalue_[i + 1], dcons_[i]);
    Layer& layer = graph_.layer(i);
    layer.prepare_inputs(input_mds(i), Phase::kTrain, graph_.need_diff_src(i));
    layer.backward_inputs(dcons_[i], dsrc_[i]);
    for (std::size_t k = 0; k < dsrc_[i].size(); ++k) {
      if (!accumulate_[i][k]) continue;
      const memory& dv = dvalue_[static_cast<std::size_t>(graph_.node(i).inputs[k])];
      accumulate_[i][k].execute(strm, {{DNNL_ARG_MULTIPLE_SRC, dv}, {DNNL_ARG_MULTIPLE_SRC + 1, dsrc_[i][k]},
                                       {DNNL_ARG_DST, dv}});
    }
    if (on_ready && ranges[i].second > 0) {
      strm.wait();
      clear_upper_vector_state();  // the callback's code may be baseline SSE (see Model::backward)
      on_ready(ranges[i].first, ranges[i].second);
    }
  }
}

namespace {

// Bytes of the distinct buffers among mems (in-place values share their input's).
std::size_t distinct_bytes(const std::vector<const memory*>& mems, const void* skip) {
  std::set<const void*> seen{skip};
  std::size_t bytes = 0;
  for (const memory* m : mems)
    if (*m && seen.insert(m->get_data_handle()).second) bytes += m->get_desc().get_size();
  return bytes;
}

}  // namespace

int GraphPlan::input_reorders(std::size_t i) const {
  int n = 0;
  for (std::size_t k = 0; k < copy_.at(i).size(); ++k)
    if (copy_[i][k] && cons_[i][k].get_desc() != value_md(graph_.node(i).inputs[k])) ++n;
  return n;
}

int GraphPlan::diff_reorders(std::size_t i) const {
  return phase_ == Phase::kTrain && dcopy_.at(i) && dcons_[i].get_desc() != dvalue_[i + 1].get_desc() ? 1 : 0;
}

PlanStats GraphPlan::stats() const {
  PlanStats st;
  std::vector<const memory*> acts, grads;
  for (std::size_t i = 0; i < graph_.size(); ++i) {
    const int reorders = input_reorders(i);
    st.forward_reorders += reorders;
    for (const auto& c : copy_[i]) st.copies += c ? 1 : 0;
    st.copies -= reorders;
    acts.push_back(&value_[i + 1]);
    for (const auto& c : cons_[i]) acts.push_back(&c);
    Layer& layer = graph_.layer(i);
    layer.prepare_inputs(input_mds(i), phase_, graph_.need_diff_src(i));  // this plan's state
    const Layer::StepReorders r = layer.step_reorders();
    st.layer_reorders += r.activations;
    st.weight_reorders += r.weights;
    st.copies += r.copies;
    st.layer_bytes += layer.state_bytes();
    if (phase_ != Phase::kTrain) continue;
    st.backward_reorders += diff_reorders(i);
    if (dcopy_[i] && diff_reorders(i) == 0) ++st.copies;
    grads.push_back(&dcons_[i]);
    for (std::size_t k = 0; k < dsrc_[i].size(); ++k) {
      grads.push_back(&dsrc_[i][k]);
      st.gradient_sums += accumulate_[i][k] ? 1 : 0;
    }
  }
  if (logits_copy_) ++st.forward_reorders;  // made only where the layouts differ
  acts.push_back(&logits_);
  for (const auto& d : dvalue_) grads.push_back(&d);
  st.activation_bytes = distinct_bytes(acts, input_.get_data_handle());
  st.gradient_bytes = distinct_bytes(grads, nullptr);
  return st;
}

}  // namespace ringtrain
