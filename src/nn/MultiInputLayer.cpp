// MultiInputLayer's state cache over several input layouts and its argument checks.
#include "nn/MultiInputLayer.h"

#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {

using dnnl::memory;

MultiInputLayer::MultiInputLayer(std::string name, std::size_t inputs) : Layer(std::move(name)), inputs_(inputs) {
  if (inputs < 2) throw std::invalid_argument(fmt::format("{}: needs at least 2 inputs, got {}", this->name(), inputs));
}

void MultiInputLayer::check_shapes(const std::vector<Dims>& in, int except) const {
  if (in.size() != inputs_)
    throw std::invalid_argument(fmt::format("{}: expects {} inputs, got {}", name(), inputs_, in.size()));
  for (std::size_t k = 1; k < in.size(); ++k) {
    bool same = in[k].size() == in[0].size();
    for (std::size_t d = 0; same && d < in[0].size(); ++d)
      same = static_cast<int>(d) == except || in[k][d] == in[0][d];
    if (!same)
      throw std::invalid_argument(fmt::format("{}: input {} has shape {}, which does not match input 0's {}", name(), k,
                                              dims_str(in[k]), dims_str(in[0])));
  }
}

void MultiInputLayer::prepare_inputs(const std::vector<memory::desc>& src_mds, Phase phase, bool need_diff_src) {
  if (src_mds.size() != inputs_)
    throw std::invalid_argument(fmt::format("{}: expects {} inputs, got {}", name(), inputs_, src_mds.size()));
  auto matches = [&](const State* s) {
    const auto* m = static_cast<const MultiState*>(s);
    return m->keys == src_mds && m->phase == phase && m->need_diff_src == need_diff_src;
  };
  if (current_ && matches(current_)) return;
  for (auto& s : states_) {
    if (matches(s.get())) {
      current_ = s.get();
      return;
    }
  }
  std::vector<memory::desc> typed;
  for (const auto& md : src_mds) typed.push_back(with_type(md, compute_type()));
  auto s = build_inputs(typed, phase, need_diff_src);
  s->keys = src_mds;
  s->key = src_mds[0];
  s->phase = phase;
  s->need_diff_src = need_diff_src;
  current_ = s.get();
  states_.push_back(std::move(s));
}

void MultiInputLayer::forward_inputs(const std::vector<memory>& srcs, const memory& dst, Phase phase, std::uint64_t) {
  MultiState& s = multi_state();
  if (s.phase != phase) throw std::logic_error(fmt::format("{}: forward in a phase it was not prepared for", name()));
  if (srcs.size() != inputs_) throw std::logic_error(fmt::format("{}: forward with {} inputs", name(), srcs.size()));
  s.src = srcs[0];
  s.dst = dst;
  run_forward_inputs(s, srcs, dst);
}

void MultiInputLayer::backward_inputs(const memory& diff_dst, const std::vector<memory>& diff_srcs) {
  MultiState& s = multi_state();
  if (s.phase != Phase::kTrain || !s.src)
    throw std::logic_error(fmt::format("{}: backward needs a preceding train-phase forward", name()));
  if (diff_srcs.size() != inputs_)
    throw std::logic_error(fmt::format("{}: backward with {} input gradients", name(), diff_srcs.size()));
  run_backward_inputs(s, diff_dst, diff_srcs);
}

MultiInputLayer::MultiState& MultiInputLayer::multi_state() const {
  if (!current_) throw std::logic_error(fmt::format("{}: used before prepare_inputs()", name()));
  return static_cast<MultiState&>(*current_);
}

std::unique_ptr<Layer::State> MultiInputLayer::build(const memory::desc&, Phase, bool) {
  throw std::logic_error(fmt::format("{}: a multi-input layer is prepared through prepare_inputs()", name()));
}

void MultiInputLayer::run_forward(State&, const memory&, const memory&, std::uint64_t) {
  throw std::logic_error(fmt::format("{}: a multi-input layer runs through forward_inputs()", name()));
}

void MultiInputLayer::run_backward(State&, const memory&, const memory&) {
  throw std::logic_error(fmt::format("{}: a multi-input layer runs through backward_inputs()", name()));
}

}  // namespace ringtrain
