// Dropout on the CPU thread (elementwise over the buffer in whatever layout it has; the
// mask is stored as 0 or 1/(1-p) per element and reused by backward).
#include "nn/Dropout.h"

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "common/Random.h"

namespace ringtrain {

using dnnl::memory;

Dropout::Dropout(std::string name, float p) : Layer(std::move(name)), p_(p) {
  if (!(p >= 0.f && p < 1.f))
    throw std::invalid_argument(fmt::format("{}: dropout p {} not in [0, 1)", this->name(), p));
}

std::string Dropout::describe() const { return fmt::format("dropout(p={})", p_); }

struct Dropout::DropoutState : State {
  std::vector<float> mask;  // one per element of the buffer (padding included)
  // bf16: the elements are widened into an f32 copy, masked there and narrowed back, by
  // oneDNN reorders (empty handles in f32, where the mask applies directly).
  memory wide;
  dnnl::reorder widen, narrow;

  // to = from * mask, elementwise (to may alias from); forward and backward alike.
  void apply_mask(dnnl::stream& strm, const memory& from, const memory& to) {
    const memory& in = wide ? wide : from;
    const memory& out = wide ? wide : to;
    if (wide) widen.execute(strm, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, wide}});
    strm.wait();  // runs on this thread, after the producer
    const auto* x = static_cast<const float*>(in.get_data_handle());
    auto* y = static_cast<float*>(out.get_data_handle());
    for (std::size_t i = 0; i < mask.size(); ++i) y[i] = x[i] * mask[i];
    if (wide) narrow.execute(strm, {{DNNL_ARG_FROM, wide}, {DNNL_ARG_TO, to}});
  }
};

std::unique_ptr<Layer::State> Dropout::build(const memory::desc& src_md, Phase phase, bool) {
  auto s = std::make_unique<DropoutState>();
  s->src_md = s->dst_md = s->diff_dst_md = s->diff_src_md = src_md;
  const memory::desc wide_md = with_type(src_md, memory::data_type::f32);
  if (phase == Phase::kTrain) s->mask.resize(wide_md.get_size() / sizeof(float));
  if (src_md.data_type() != memory::data_type::f32) {
    auto& eng = engine();
    s->wide = memory(wide_md, eng);
    const memory narrow(src_md, eng, DNNL_MEMORY_NONE);
    s->widen = dnnl::reorder(narrow, s->wide);
    s->narrow = dnnl::reorder(s->wide, narrow);
  }
  return s;
}

void Dropout::run_forward(State& base, const memory& src, const memory& dst, std::uint64_t seed) {
  auto& s = static_cast<DropoutState&>(base);
  if (s.phase != Phase::kTrain) {
    stream().wait();  // runs on this thread, after the producer
    if (src.get_data_handle() != dst.get_data_handle())
      std::memcpy(dst.get_data_handle(), src.get_data_handle(), s.src_md.get_size());
    return;
  }
  // Keep iff the 24-bit uniform u >= p: P(keep) = 1 - p up to 2^-24.
  const float scale = 1.0f / (1.0f - p_);
  const auto threshold = static_cast<std::uint64_t>(static_cast<double>(p_) * (1ULL << 24));
  // Indexed by the keep decision rather than chosen by a branch: with p = 0.5 the branch was
  // a coin flip, mispredicted on half the elements (alexnet's two masks, 164 K elements a
  // step, ~0.9 ms of CPU samples per step with the branch). Same values, same stream.
  const float keep_scale[2] = {0.0f, scale};
  Rng rng(seed);
  for (auto& m : s.mask) m = keep_scale[(rng.next() >> 40) >= threshold];
  s.apply_mask(stream(), src, dst);
}

void Dropout::run_backward(State& base, const memory& diff_dst, const memory& diff_src) {
  auto& s = static_cast<DropoutState&>(base);
  if (s.need_diff_src) s.apply_mask(stream(), diff_dst, diff_src);
}

}  // namespace ringtrain
