// Concat on oneDNN's concat primitive (inputs in any layouts, dst in the one it picks).
// Backward: each input's gradient is its channel slice of diff_dst, read through a
// sub-memory of the plain diff_dst (a blocked layout cannot be sliced at any channel).
#include "nn/Concat.h"

#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {

using dnnl::memory;

struct Concat::ConcatState : MultiState {
  dnnl::concat fwd;
  std::vector<memory::desc> slices;      // of the plain diff_dst, per input
  std::vector<dnnl::reorder> to_inputs;  // slice -> input gradient
};

std::string Concat::describe() const { return fmt::format("concat(inputs={},axis=1)", num_inputs()); }

Dims Concat::out_shape_of(const std::vector<Dims>& in) const {
  check_shapes(in, 1);
  if (in[0].size() < 2) throw std::invalid_argument(fmt::format("{}: expects (N, C, ...) inputs", name()));
  Dims out = in[0];
  for (std::size_t k = 1; k < in.size(); ++k) out[1] += in[k][1];
  return out;
}

std::unique_ptr<MultiInputLayer::MultiState> Concat::build_inputs(const std::vector<memory::desc>& src_mds,
                                                                   Phase phase, bool need_diff_src) {
  auto s = std::make_unique<ConcatState>();
  auto& eng = engine();
  const dnnl::concat::primitive_desc pd(1, src_mds, eng);
  s->fwd = dnnl::concat(pd);
  s->src_mds = src_mds;
  s->src_md = src_mds[0];
  s->dst_md = pd.dst_desc();
  const auto type = src_mds[0].data_type();
  std::vector<Dims> in;
  for (const auto& md : src_mds) in.push_back(md_dims(md));
  s->diff_dst_md = plain_md(out_shape_of(in), type);
  if (phase == Phase::kTrain) {
    std::int64_t offset = 0;
    for (const Dims& d : in) {
      s->diff_src_mds.push_back(plain_md(d, type));
      memory::dims offsets(d.size(), 0);
      offsets[1] = offset;
      s->slices.push_back(s->diff_dst_md.submemory_desc(memory::dims(d.begin(), d.end()), offsets));
      if (need_diff_src)
        s->to_inputs.emplace_back(dnnl::reorder::primitive_desc(eng, s->slices.back(), eng, s->diff_src_mds.back()));
      offset += d[1];
    }
    s->diff_src_md = s->diff_src_mds[0];
  }
  return s;
}

void Concat::run_forward_inputs(MultiState& base, const std::vector<memory>& srcs, const memory& dst) {
  auto& s = static_cast<ConcatState&>(base);
  std::unordered_map<int, memory> args{{DNNL_ARG_DST, dst}};
  for (std::size_t k = 0; k < srcs.size(); ++k) args.emplace(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(k), srcs[k]);
  s.fwd.execute(stream(), args);
}

void Concat::run_backward_inputs(MultiState& base, const memory& diff_dst, const std::vector<memory>& diff_srcs) {
  auto& s = static_cast<ConcatState&>(base);
  if (!s.need_diff_src) return;
  for (std::size_t k = 0; k < diff_srcs.size(); ++k) {
    if (!diff_srcs[k]) continue;
    const memory slice(s.slices[k], engine(), diff_dst.get_data_handle());
    s.to_inputs[k].execute(stream(), {{DNNL_ARG_FROM, slice}, {DNNL_ARG_TO, diff_srcs[k]}});
  }
}

}  // namespace ringtrain
