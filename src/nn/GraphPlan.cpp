// GraphPlan: building and running one (batch size, phase)'s memories over a Graph.
#include "nn/GraphPlan.h"

#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "common/Random.h"
#include "common/VectorState.h"
#include "nn/DnnlContext.h"

namespace ringtrain {

using dnnl::memory;

GraphPlan::GraphPlan(const Graph& graph, int n, Phase phase, bool share_memory)
    : graph_(graph), n_(n), phase_(phase) {
  build_forward();
  if (phase == Phase::kTrain) build_backward();
  arena_.place(share_memory);
}

int GraphPlan::backward_step(std::size_t i) const { return static_cast<int>(2 * graph_.size() - 1 - i); }

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
    const int step = static_cast<int>(i);
    // Backward reads the input (as this node received it) or the output: they live until then.
    const bool train = phase_ == Phase::kTrain && graph_.runs_backward(i);
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      const memory& v = value_[static_cast<std::size_t>(inputs[k])];
      // The user's input is always copied in (reordered if the layer wants another layout),
      // so no layer ever writes into the caller's buffer.
      if (inputs[k] == Graph::kInput || layer.input_md(k) != v.get_desc()) {
        cons_[i].push_back(arena_.create(layer.input_md(k)));
        copy_[i].emplace_back(v, cons_[i].back());
      } else {
        cons_[i].push_back(v);
        copy_[i].emplace_back();
      }
      arena_.use(v, step);
      arena_.use(cons_[i][k], step);
      if (train && layer.needs_src_in_backward()) arena_.use(cons_[i][k], backward_step(i));
    }
    // In place only if that destroys nothing anyone needs: the input is this node's private
    // copy, or this node is its only reader and its producer does not read its dst in backward.
    bool in_place = inputs.size() == 1 && layer.in_place() && layer.dst_md().get_size() == layer.src_md().get_size();
    if (in_place && !copy_[i][0]) {
      const int v = inputs[0];
      in_place = graph_.readers(v).size() == 1 && !graph_.layer(static_cast<std::size_t>(v - 1)).needs_dst_in_backward();
    }
    value_[i + 1] = in_place ? arena_.alias(layer.dst_md(), cons_[i][0]) : arena_.create(layer.dst_md());
    arena_.use(value_[i + 1], step);
    if (train && layer.needs_dst_in_backward()) arena_.use(value_[i + 1], backward_step(i));
  }
  const memory::desc logits_md = plain_md({n_, graph_.shape(graph_.output())[1]});
  const memory& out = value_.back();
  if (out.get_desc() == logits_md) {
    logits_ = out;
    arena_.pin(out);  // the caller reads the logits after the step
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
    const bool through = !in_place && passes_through(i, k);
    if (through) passed_[i] = static_cast<int>(k);
    dv = in_place || through ? arena_.alias(md, dcons_[i]) : arena_.create(md);
    dsrc_[i][k] = dv;
    arena_.use(dv, backward_step(i));
    return;
  }
  if (!dv) throw std::logic_error(fmt::format("{}: gradient of '{}' added before it was written", layer.name(),
                                              graph_.value_name(v)));
  dsrc_[i][k] = arena_.create(md);
  arena_.use(dv, backward_step(i));
  arena_.use(dsrc_[i][k], backward_step(i));
  // A shared slot left empty (share_gradient_slots): dv = that gradient + this one, read from
  // where it lives: the floats a copy of it would have held, added in the same order.
  Accumulation acc;
  std::swap(acc.first, pending_[static_cast<std::size_t>(v)]);
  if (acc.first) arena_.use(acc.first, backward_step(i));
  const memory::desc& first_md = acc.first ? acc.first.get_desc() : dv.get_desc();
  // oneDNN 2.6's sum is its generic simple:any kernel: 0.97 ms against 0.61 ms for the jit
  // binary add in place over 128x16x32x32 nChw8c (3.95 against 2.06 ms over 32x64x56x56),
  // one thread, CPU time; the same float additions.
  if (md == dv.get_desc() && first_md == md) {
    const dnnl::binary::primitive_desc pd(dnnl::binary::desc(dnnl::algorithm::binary_add, md, md, md), eng);
    if (std::string(pd.impl_info_str()).rfind("ref", 0) != 0) {
      acc.add = dnnl::binary(pd);
      acc.binary = true;
    }
  }
  if (!acc.add) {
    const std::vector<float> scales{1.f, 1.f};
    acc.add = dnnl::sum(dnnl::sum::primitive_desc(dv.get_desc(), scales, {first_md, md}, eng));
  }
  accumulate_[i][k] = acc;
}

bool GraphPlan::passes_through(std::size_t i, std::size_t k) const {
  const Layer& layer = graph_.layer(i);
  const int v = graph_.node(i).inputs[k];
  if (!layer.passes_gradient_through() || layer.diff_input_md(k) != layer.diff_dst_md() || v == Graph::kInput ||
      graph_.readers(v).size() != 1)
    return false;
  // diff_dst stays as it is from here on (its readers are done), so the gradient is it while
  // nothing writes over it: v has one reader (nothing adds into it), its producer does not
  // write its diff_src over it in place, and no other slot of this node is it already.
  return passed_[i] < 0 && !graph_.layer(static_cast<std::size_t>(v - 1)).in_place();
}

void GraphPlan::share_gradient_slots(std::size_t i) {
  const auto& inputs = graph_.node(i).inputs;
  if (!graph_.layer(i).shares_input_gradients()) return;
  // The slot whose gradient the others read: it must stay as written until their next readers
  // add it in, so its tensor has no other reader (nothing adds into it) and its producer's
  // backward does not write its own diff_src over it in place.
  std::size_t home = 0;
  for (; home < inputs.size(); ++home) {
    const int u = inputs[home];
    if (u != Graph::kInput && dsrc_[i][home] && !accumulate_[i][home] && graph_.readers(u).size() == 1 &&
        !graph_.layer(static_cast<std::size_t>(u - 1)).in_place())
      break;
  }
  if (home == inputs.size()) return;
  for (std::size_t b = 0; b < inputs.size(); ++b) {
    const int x = inputs[b];
    // Slot b writes x's gradient first, and another node reads x: that one adds in later.
    if (b == home || !dsrc_[i][b] || accumulate_[i][b] || dsrc_[i][b].get_desc() != dsrc_[i][home].get_desc())
      continue;
    int elsewhere = 0, here = 0;
    for (const auto& r : graph_.readers(x)) (r.node == static_cast<int>(i) ? here : elsewhere) += 1;
    if (here != 1 || elsewhere == 0) continue;
    pending_[static_cast<std::size_t>(x)] = dsrc_[i][home];
    dsrc_[i][b] = memory();
  }
}

void GraphPlan::build_backward() {
  auto& eng = DnnlContext::get().engine();
  const std::size_t nodes = graph_.size();
  dvalue_.assign(nodes + 1, memory());
  dcons_.assign(nodes, memory());
  dcopy_.assign(nodes, dnnl::reorder());
  dsrc_.assign(nodes, {});
  accumulate_.assign(nodes, {});
  pending_.assign(nodes + 1, memory());
  passed_.assign(nodes, -1);
  diff_logits_ = memory(logits_.get_desc(), eng);
  dvalue_.back() = diff_logits_;
  for (std::size_t i = nodes; i-- > 0;) {
    const std::size_t slots = graph_.node(i).inputs.size();
    dsrc_[i].assign(slots, memory());
    accumulate_[i].assign(slots, Accumulation());
    if (!graph_.runs_backward(i)) continue;
    Layer& layer = graph_.layer(i);
    layer.prepare_inputs(input_mds(i), Phase::kTrain, graph_.need_diff_src(i));
    const memory& dout = dvalue_[i + 1];
    if (layer.diff_dst_md() == dout.get_desc()) {
      dcons_[i] = dout;
    } else {
      dcons_[i] = arena_.create(layer.diff_dst_md());
      dcopy_[i] = dnnl::reorder(dout, dcons_[i]);
    }
    arena_.use(dout, backward_step(i));
    arena_.use(dcons_[i], backward_step(i));
    // Slots in reverse, so that of a node reading one tensor twice the later slot writes first.
    for (std::size_t k = slots; k-- > 0;)
      if (graph_.needs_grad(graph_.node(i).inputs[k])) add_gradient_slot(i, k);
    share_gradient_slots(i);
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
      const Accumulation& acc = accumulate_[i][k];
      if (!acc) continue;
      const memory& dv = dvalue_[static_cast<std::size_t>(graph_.node(i).inputs[k])];
      const memory& first = acc.first ? acc.first : dv;
      if (acc.binary) {
        acc.add.execute(strm, {{DNNL_ARG_SRC_0, first}, {DNNL_ARG_SRC_1, dsrc_[i][k]}, {DNNL_ARG_DST, dv}});
      } else {
        acc.add.execute(strm,
                        {{DNNL_ARG_MULTIPLE_SRC, first}, {DNNL_ARG_MULTIPLE_SRC + 1, dsrc_[i][k]}, {DNNL_ARG_DST, dv}});
      }
    }
    if (on_ready && ranges[i].second > 0) {
      strm.wait();
      clear_upper_vector_state();  // the callback's code may be baseline SSE (see Model::backward)
      on_ready(ranges[i].first, ranges[i].second);
    }
  }
}

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
  for (std::size_t i = 0; i < graph_.size(); ++i) {
    const int reorders = input_reorders(i);
    st.forward_reorders += reorders;
    for (const auto& c : copy_[i]) st.copies += c ? 1 : 0;
    st.copies -= reorders;
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
    for (const auto& acc : accumulate_[i]) {
      st.gradient_sums += acc ? 1 : 0;
      st.shared_gradients += acc.first ? 1 : 0;
    }
    st.passed_gradients += passed_[i] >= 0 ? 1 : 0;
  }
  if (logits_copy_) ++st.forward_reorders;  // made only where the layouts differ
  st.separate_bytes = arena_.separate_bytes();
  st.planned_bytes = arena_.bytes();
  return st;
}

}  // namespace ringtrain
