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
  // oneDNN reorders (empty handles in f32, where the mask applies in place).
  memory wide;
  dnnl::reorder widen_src, narrow_dst, widen_diff_dst, narrow_diff_src;
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
    s->widen_src = s->widen_diff_dst = dnnl::reorder(narrow, s->wide);
    s->narrow_dst = s->narrow_diff_src = dnnl::reorder(s->wide, narrow);
  }
  return s;
}

namespace {

// y = x * mask over n floats (x may alias y).
void apply_mask(const float* x, float* y, const std::vector<float>& mask) {
  for (std::size_t i = 0; i < mask.size(); ++i) y[i] = x[i] * mask[i];
}

}  // namespace

void Dropout::run_forward(State& base, const memory& src, const memory& dst, std::uint64_t seed) {
  auto& s = static_cast<DropoutState&>(base);
  auto& strm = stream();
  if (s.phase != Phase::kTrain) {
    strm.wait();  // runs on this thread, after the producer
    if (src.get_data_handle() != dst.get_data_handle())
      std::memcpy(dst.get_data_handle(), src.get_data_handle(), s.src_md.get_size());
    return;
  }
  // Keep iff the 24-bit uniform u >= p: P(keep) = 1 - p up to 2^-24.
  const float scale = 1.0f / (1.0f - p_);
  const auto threshold = static_cast<std::uint64_t>(static_cast<double>(p_) * (1ULL << 24));
  Rng rng(seed);
  for (auto& m : s.mask) m = (rng.next() >> 40) >= threshold ? scale : 0.0f;
  if (s.wide) {
    s.widen_src.execute(strm, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, s.wide}});
    strm.wait();
    auto* w = static_cast<float*>(s.wide.get_data_handle());
    apply_mask(w, w, s.mask);
    s.narrow_dst.execute(strm, {{DNNL_ARG_FROM, s.wide}, {DNNL_ARG_TO, dst}});
    return;
  }
  strm.wait();
  apply_mask(static_cast<const float*>(src.get_data_handle()), static_cast<float*>(dst.get_data_handle()), s.mask);
}

void Dropout::run_backward(State& base, const memory& diff_dst, const memory& diff_src) {
  auto& s = static_cast<DropoutState&>(base);
  if (!s.need_diff_src) return;
  auto& strm = stream();
  if (s.wide) {
    s.widen_diff_dst.execute(strm, {{DNNL_ARG_FROM, diff_dst}, {DNNL_ARG_TO, s.wide}});
    strm.wait();
    auto* w = static_cast<float*>(s.wide.get_data_handle());
    apply_mask(w, w, s.mask);
    s.narrow_diff_src.execute(strm, {{DNNL_ARG_FROM, s.wide}, {DNNL_ARG_TO, diff_src}});
    return;
  }
  strm.wait();
  apply_mask(static_cast<const float*>(diff_dst.get_data_handle()), static_cast<float*>(diff_src.get_data_handle()),
             s.mask);
}

}  // namespace ringtrain
