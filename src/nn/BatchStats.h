// BatchStats: a batch's per-channel mean and biased variance of an fp32 (N, C, H, W) tensor,
// for BatchNorm2d's training forward. oneDNN 2.6's AVX2 batch normalisation accumulates each
// channel's sums in fp32 in one pass over blocked and nhwc tensors; its statistics are ~1e-6
// of the standard deviation off, 8x PyTorch's error, and that moves ReLU inputs near zero to the
// other side (docs/benchmarks/graph-models-train.md). Here: two passes, the mean and then the
// squared deviations from it (with the deviations' own sum as a correction), each summed in fp32
// over runs of at most kRun elements and across runs in double.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace ringtrain {

class BatchStats {
 public:
  // Whether `md` is a dense fp32 (N, C, H, W) layout these statistics read: nchw, nhwc, nChw8c
  // or nChw16c (others: oneDNN computes the statistics itself).
  static bool supports(const dnnl::memory::desc& md);
  // mean[c] and variance[c] (biased: divided by N*H*W) of `src`, whose layout supports() accepts.
  static void compute(const dnnl::memory& src, float* mean, float* variance);
};

}  // namespace ringtrain
