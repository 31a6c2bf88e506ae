// Conv2d's choices of kernels and its oneDNN primitive descriptors: which of nn's own kernels
// (nn/Winograd, nn/PixelPairConv) or oneDNN's Winograd this CPU and process allow, the
// backward-weights descriptor's layout search, the forward's ReLU post-op. Internal to nn/.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace ringtrain::conv {

// Strides, dilations (oneDNN's: 0 = dense) and symmetric padding of one layer.
struct Geometry {
  dnnl::memory::dims strides, dilates, pad;
};

// RINGTRAIN_CONV_WINOGRAD=0 is not set (read once): A/B runs against oneDNN's direct kernels.
bool winograd_allowed();
// nn/Winograd on this CPU and in this process (AVX2, allowed).
bool winograd_enabled();
// nn/PixelPairConv on this CPU and in this process: AVX2 or AVX-512 (avx512_core and later),
// where it was measured, and RINGTRAIN_CONV_PAIRS=0 not set (read once).
bool pixel_pairs_enabled();
// oneDNN's jit_wino_4x3 exists from avx512_core on.
bool onednn_winograd_isa();

// Backward-weights, first with the forward's src / diff_dst layouts (no activation
// reorders) as long as oneDNN has a jit kernel for them; else nhwc; else layouts of oneDNN's
// choosing. With Winograd asked for (alg), first that with the forward's layouts (counted in
// wino_passes), then all of the above with direct kernels.
dnnl::convolution_backward_weights::primitive_desc backward_weights_pd(
    dnnl::algorithm alg, const dnnl::memory::desc& src_md, const dnnl::memory::desc& dst_md,
    const dnnl::memory::desc& dw_any, const dnnl::memory::desc& b_md, const Geometry& g,
    const dnnl::convolution_forward::primitive_desc& fwd_pd, int& wino_passes);

// A reorder from the layout `from` into a new memory of layout `to`, unless they agree
// (then both stay empty).
void reorder_if_needed(const dnnl::memory::desc& from, const dnnl::memory::desc& to, dnnl::memory& dst,
                       dnnl::reorder& r);

// forward's post-op: with `relu`, an eltwise ReLU applied to the accumulator before the store
// (and before bf16 rounding, which keeps the sign): the bits of a separate ReLU, one pass over
// dst fewer.
dnnl::primitive_attr relu_attr(bool relu);

// make(alg, allow_empty) -> a primitive desc: on oneDNN's Winograd when `alg` asks for it and
// oneDNN has a kernel for the pass (counted in wino_passes), else on its direct kernels.
template <class Make>
auto winograd_or_direct(dnnl::algorithm alg, const Make& make, int& wino_passes) {
  if (alg != dnnl::algorithm::convolution_direct) {
    auto pd = make(alg, /*allow_empty=*/true);
    if (pd) {
      ++wino_passes;
      return pd;
    }
  }
  return make(dnnl::algorithm::convolution_direct, /*allow_empty=*/false);
}

}  // namespace ringtrain::conv
