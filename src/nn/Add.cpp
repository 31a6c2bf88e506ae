// Add on oneDNN: binary_add (with a ReLU post-op when fused) for two inputs, sum for more.
// Backward: every input's gradient is diff_dst (masked by dst > 0 with ReLU, computed once
// by eltwise backward from dst and copied to the other inputs).
#include "nn/Add.h"

#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {

using dnnl::memory;

struct Add::AddState : MultiState {
  dnnl::binary binary;
  dnnl::sum sum;
  dnnl::eltwise_backward relu_bwd;
  dnnl::reorder copy;  // diff_dst -> one input's gradient (same layout)
};

Add::Add(std::string name, std::size_t inputs, bool relu) : MultiInputLayer(std::move(name), inputs), relu_(relu) {
  if (relu && inputs != 2)
    throw std::invalid_argument(fmt::format("{}: a fused ReLU needs exactly 2 inputs, got {}", this->name(), inputs));
}

std::string Add::describe() const { return fmt::format("add(inputs={},relu={})", num_inputs(), relu_ ? 1 : 0); }

Dims Add::out_shape_of(const std::vector<Dims>& in) const {
  check_shapes(in, -1);
  return in[0];
}

std::unique_ptr<MultiInputLayer::MultiState> Add::build_inputs(const std::vector<memory::desc>& src_mds, Phase phase,
                                                                bool need_diff_src) {
  auto s = std::make_unique<AddState>();
  auto& eng = engine();
  // Every input in input 0's layout (the graph reorders the others), and dst in it too.
  const memory::desc& md = src_mds[0];
  s->src_mds.assign(src_mds.size(), md);
  s->src_md = s->dst_md = s->diff_dst_md = md;
  if (src_mds.size() == 2) {
    dnnl::primitive_attr attr;
    if (relu_) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      attr.set_post_ops(ops);
    }
    const dnnl::binary::primitive_desc pd(dnnl::binary::desc(dnnl::algorithm::binary_add, md, md, md), attr, eng);
    s->binary = dnnl::binary(pd);
  } else {
    const std::vector<float> scales(src_mds.size(), 1.f);
    s->sum = dnnl::sum(dnnl::sum::primitive_desc(md, scales, s->src_mds, eng));
  }
  if (phase == Phase::kTrain) {
    s->diff_src_mds.assign(src_mds.size(), md);
    s->copy = dnnl::reorder(dnnl::reorder::primitive_desc(eng, md, eng, md));
    if (relu_ && need_diff_src) {
      const auto alg = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
      const dnnl::eltwise_forward::primitive_desc hint(
          dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, alg, md, 0.f, 0.f), eng);
      s->relu_bwd = dnnl::eltwise_backward({dnnl::eltwise_backward::desc(alg, md, md, 0.f, 0.f), eng, hint});
    }
  }
  s->diff_src_md = md;
  return s;
}

void Add::run_forward_inputs(MultiState& base, const std::vector<memory>& srcs, const memory& dst) {
  auto& s = static_cast<AddState&>(base);
  if (s.binary) {
    s.binary.execute(stream(), {{DNNL_ARG_SRC_0, srcs[0]}, {DNNL_ARG_SRC_1, srcs[1]}, {DNNL_ARG_DST, dst}});
    return;
  }
  std::unordered_map<int, memory> args{{DNNL_ARG_DST, dst}};
  for (std::size_t k = 0; k < srcs.size(); ++k) args.emplace(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(k), srcs[k]);
  s.sum.execute(stream(), args);
}

void Add::run_backward_inputs(MultiState& base, const memory& diff_dst, const std::vector<memory>& diff_srcs) {
  auto& s = static_cast<AddState&>(base);
  if (!s.need_diff_src) return;
  memory grad = diff_dst;  // what every input receives
  if (s.relu_bwd) {
    // Masked once, into the first input that wants a gradient; the others copy it.
    for (const auto& d : diff_srcs) {
      if (!d) continue;
      s.relu_bwd.execute(stream(), {{DNNL_ARG_DST, s.dst}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, d}});
      grad = d;
      break;
    }
  }
  for (const auto& d : diff_srcs)
    if (d && d.get_data_handle() != grad.get_data_handle())
      s.copy.execute(stream(), {{DNNL_ARG_FROM, grad}, {DNNL_ARG_TO, d}});
}

}  // namespace ringtrain
