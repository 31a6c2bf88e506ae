// Conv2d's kernel choices and oneDNN primitive descriptors (nn/ConvPrimitives.h).
#include "nn/ConvPrimitives.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "nn/DnnlContext.h"
#include "nn/Precision.h"

namespace ringtrain::conv {

using dnnl::memory;
using tag = memory::format_tag;

// Backward-weights, first with the forward's src / diff_dst layouts (no activation
// reorders) as long as oneDNN has a jit kernel for them; else nhwc, whose jit kernel beat
// oneDNN's own pick where the forward layouts fail (LeNet's conv2, 6 input channels: 0.20
// vs 0.47 ms per step for avx2 8-blocked, batch 64, one thread); else layouts of oneDNN's
// choosing.
// With Winograd asked for (alg), first that with the forward's layouts (counted in
// wino_passes), then all of the above with direct kernels.
dnnl::convolution_backward_weights::primitive_desc backward_weights_pd(
    dnnl::algorithm alg, const memory::desc& src_md, const memory::desc& dst_md, const memory::desc& dw_any,
    const memory::desc& b_md, const Geometry& g, const dnnl::convolution_forward::primitive_desc& fwd_pd,
    int& wino_passes) {
  const auto& eng = fwd_pd.get_engine();
  const auto type = src_md.data_type();
  if (alg != dnnl::algorithm::convolution_direct) {
    const dnnl::convolution_backward_weights::desc wino(alg, src_md, dw_any, b_md, dst_md, g.strides, g.dilates,
                                                        g.pad, g.pad);
    dnnl::convolution_backward_weights::primitive_desc pd(wino, eng, fwd_pd, /*allow_empty=*/true);
    if (pd) {
      ++wino_passes;
      return pd;
    }
  }
  const memory::desc src_nhwc(src_md.dims(), type, tag::nhwc), dst_nhwc(dst_md.dims(), type, tag::nhwc);
  const std::pair<memory::desc, memory::desc> candidates[] = {{src_md, dst_md}, {src_nhwc, dst_nhwc}};
  for (const auto& [src, diff_dst] : candidates) {
    const dnnl::convolution_backward_weights::desc fixed(dnnl::algorithm::convolution_direct, src, dw_any, b_md,
                                                         diff_dst, g.strides, g.dilates, g.pad, g.pad);
    dnnl::convolution_backward_weights::primitive_desc pd(fixed, eng, fwd_pd, /*allow_empty=*/true);
    if (pd && std::string(pd.impl_info_str()).rfind("jit", 0) == 0) return pd;
  }
  const memory::desc src_any(src_md.dims(), type, tag::any), dst_any(dst_md.dims(), type, tag::any);
  const dnnl::convolution_backward_weights::desc any(dnnl::algorithm::convolution_direct, src_any, dw_any, b_md,
                                                     dst_any, g.strides, g.dilates, g.pad, g.pad);
  return {any, eng, fwd_pd};
}

// RINGTRAIN_CONV_WINOGRAD=0 is not set (read once).
bool winograd_allowed() {
  static const bool allowed = [] {
    const char* env = std::getenv("RINGTRAIN_CONV_WINOGRAD");
    return !(env && std::strcmp(env, "0") == 0);
  }();
  return allowed;
}

namespace {

bool avx2_isa() {
  const dnnl::cpu_isa isa = effective_isa();
  return isa == dnnl::cpu_isa::avx2 || isa == dnnl::cpu_isa::avx2_vnni;
}

}  // namespace

// nn/Winograd on this CPU and in this process.
bool winograd_enabled() { return avx2_isa() && winograd_allowed(); }

// oneDNN's jit_wino_4x3 exists from avx512_core on.
bool onednn_winograd_isa() {
  const dnnl::cpu_isa isa = effective_isa();
  return isa == dnnl::cpu_isa::avx512_core || isa == dnnl::cpu_isa::avx512_core_vnni ||
         isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

// The pairs' sgemms (oneDNN's, AVX-512 where the CPU has it) beat oneDNN's convolution kernels
// on 2x2 images on AVX2 and AVX-512 alike (docs/benchmarks/zen3.md, zen5.md).
bool pixel_pairs_enabled() {
  static const bool allowed = [] {
    const char* env = std::getenv("RINGTRAIN_CONV_PAIRS");
    return !(env && std::strcmp(env, "0") == 0);
  }();
  return (avx2_isa() || onednn_winograd_isa()) && allowed;
}

// A reorder from the layout `from` into a new memory of layout `to`, unless they agree
// (then both stay empty).
void reorder_if_needed(const memory::desc& from, const memory::desc& to, memory& dst, dnnl::reorder& r) {
  if (from == to) return;
  const auto& eng = DnnlContext::get().engine();
  dst = memory(to, eng);
  r = dnnl::reorder(memory(from, eng, DNNL_MEMORY_NONE), dst);
}

// forward's post-op: with `relu`, an eltwise ReLU applied to the accumulator before the store
// (and before bf16 rounding, which keeps the sign): the bits of a separate ReLU, one pass over
// dst fewer.
dnnl::primitive_attr relu_attr(bool relu) {
  dnnl::primitive_attr attr;
  if (relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  return attr;
}

}  // namespace ringtrain::conv
