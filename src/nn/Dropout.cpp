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
  std::vector<float> mask;  // one per float of the buffer (padding included)
};

std::unique_ptr<Layer::State> Dropout::build(const memory::desc& src_md, Phase phase, bool) {
  auto s = std::make_unique<DropoutState>();
  s->src_md = s->dst_md = s->diff_dst_md = s->diff_src_md = src_md;
  if (phase == Phase::kTrain) s->mask.resize(src_md.get_size() / sizeof(float));
  return s;
}

void Dropout::run_forward(State& base, const memory& src, const memory& dst, std::uint64_t seed) {
  auto& s = static_cast<DropoutState&>(base);
  stream().wait();  // runs on this thread, after the producer
  const auto* x = static_cast<const float*>(src.get_data_handle());
  auto* y = static_cast<float*>(dst.get_data_handle());
  const std::size_t n = s.src_md.get_size() / sizeof(float);
  if (s.phase != Phase::kTrain) {
    if (x != y) std::memcpy(y, x, n * sizeof(float));
    return;
  }
  // Keep iff the 24-bit uniform u >= p: P(keep) = 1 - p up to 2^-24.
  const float scale = 1.0f / (1.0f - p_);
  const auto threshold = static_cast<std::uint64_t>(static_cast<double>(p_) * (1ULL << 24));
  Rng rng(seed);
  for (std::size_t i = 0; i < n; ++i) {
    s.mask[i] = (rng.next() >> 40) >= threshold ? scale : 0.0f;
    y[i] = x[i] * s.mask[i];
  }
}

void Dropout::run_backward(State& base, const memory& diff_dst, const memory& diff_src) {
  auto& s = static_cast<DropoutState&>(base);
  if (!s.need_diff_src) return;
  stream().wait();
  const auto* dy = static_cast<const float*>(diff_dst.get_data_handle());
  auto* dx = static_cast<float*>(diff_src.get_data_handle());
  for (std::size_t i = 0; i < s.mask.size(); ++i) dx[i] = dy[i] * s.mask[i];
}

}  // namespace ringtrain
