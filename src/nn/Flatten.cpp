// Flatten: a free reshape of a plain buffer; copies only when run out of place.
#include "nn/Flatten.h"

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {

using dnnl::memory;

Dims Flatten::out_shape(const Dims& in) const {
  if (in.size() < 2) throw std::invalid_argument(fmt::format("{}: expects (N, ...), got {}", name(), dims_str(in)));
  std::int64_t f = 1;
  for (std::size_t i = 1; i < in.size(); ++i) f *= in[i];
  return {in[0], f};
}

std::unique_ptr<Layer::State> Flatten::build(const memory::desc& src_md, Phase, bool) {
  const Dims in = md_dims(src_md);
  auto s = std::make_unique<State>();
  s->src_md = plain_md(in, src_md.data_type());
  s->dst_md = plain_md(out_shape(in), src_md.data_type());
  s->diff_dst_md = s->dst_md;
  s->diff_src_md = s->src_md;
  return s;
}

static void copy_if_distinct(const memory& from, const memory& to) {
  void* dst = to.get_data_handle();
  const void* src = from.get_data_handle();
  if (dst != src) std::memcpy(dst, src, from.get_desc().get_size());
}

void Flatten::run_forward(State&, const memory& src, const memory& dst, std::uint64_t) {
  stream().wait();  // the copy runs on this thread, after the producer
  copy_if_distinct(src, dst);
}

void Flatten::run_backward(State& s, const memory& diff_dst, const memory& diff_src) {
  if (!s.need_diff_src) return;
  stream().wait();
  copy_if_distinct(diff_dst, diff_src);
}

}  // namespace ringtrain
