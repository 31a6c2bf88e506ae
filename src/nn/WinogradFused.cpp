// The point products of Winograd F(4x4, 3x3) for narrow layers: M = V U at each of the 36
// points for a group of kGroup tiles, register-blocked (kGroup tiles x 16 output channels of
// accumulators, one input channel at a time), so V, U's rows and M stay in L1.
//
// Compiled with contraction on and as an FMA clone (AVX + FMA) beside the baseline: the
// multiply-adds are FMAs where the CPU has them. The clones' results differ in their last bits,
// as the sgemm of the wide layers' pipeline differs between oneDNN's ISA kernels; the
// transforms around it (Winograd.cpp) stay bit-identical across CPUs.
#include "nn/WinogradKernels.h"

#include <algorithm>

#include "nn/Winograd.h"

namespace ringtrain::winograd {

namespace detail {

namespace {

#if defined(RINGTRAIN_NATIVE) || defined(RINGTRAIN_NO_VECTOR_CLONES) || !defined(__x86_64__) || defined(__clang__)
#define RINGTRAIN_FMA_CLONES
#else
#define RINGTRAIN_FMA_CLONES __attribute__((target_clones("fma", "default")))
#endif

typedef float v8 __attribute__((vector_size(32), aligned(4), may_alias));

// Output channels [k0, k0 + 8 * NK) of one point for the group's tiles.
template <int NK>
inline __attribute__((always_inline)) void block(const float* __restrict vx, std::int64_t cin,
                                                 const float* __restrict ux, std::int64_t cout,
                                                 float* __restrict mx) {
  v8 acc[kGroup][NK] = {};
  for (std::int64_t c = 0; c < cin; ++c) {
    v8 b[NK];
    for (int n = 0; n < NK; ++n) b[n] = *reinterpret_cast<const v8*>(ux + c * cout + n * kLanes);
    for (int t = 0; t < kGroup; ++t) {
      const float a = vx[t * kPoints * cin + c];
      for (int n = 0; n < NK; ++n) acc[t][n] += a * b[n];
    }
  }
  for (int t = 0; t < kGroup; ++t)
    for (int n = 0; n < NK; ++n) *reinterpret_cast<v8*>(mx + t * kPoints * cout + n * kLanes) = acc[t][n];
}

// dU rows [c0, c0 + 4) x output channels [k0, k0 + 8 * NK) of one point, over the group's tiles.
template <int NK>
inline __attribute__((always_inline)) void weight_block(const float* __restrict vx, std::int64_t cin,
                                                        const float* __restrict dmx, std::int64_t cout,
                                                        float* __restrict dux) {
  v8 acc[4][NK];
  for (int i = 0; i < 4; ++i)
    for (int n = 0; n < NK; ++n) acc[i][n] = *reinterpret_cast<const v8*>(dux + i * cout + n * kLanes);
  for (int t = 0; t < kWeightGroup; ++t) {
    v8 d[NK];
    for (int n = 0; n < NK; ++n) d[n] = *reinterpret_cast<const v8*>(dmx + t * kPoints * cout + n * kLanes);
    for (int i = 0; i < 4; ++i) {
      const float a = vx[t * kPoints * cin + i];
      for (int n = 0; n < NK; ++n) acc[i][n] += a * d[n];
    }
  }
  for (int i = 0; i < 4; ++i)
    for (int n = 0; n < NK; ++n) *reinterpret_cast<v8*>(dux + i * cout + n * kLanes) = acc[i][n];
}

}  // namespace

RINGTRAIN_FMA_CLONES void fused_weight_products(const float* __restrict v, std::int64_t cin,
                                                const float* __restrict dm, std::int64_t cout, float* __restrict du,
                                                std::int64_t plane) {
  for (int xi = 0; xi < kPoints; ++xi)
    for (std::int64_t c0 = 0; c0 < cin; c0 += 4) {
      const float* vx = v + xi * cin + c0;
      const float* dmx = dm + xi * cout;
      float* dux = du + xi * plane + c0 * cout;
      std::int64_t k0 = 0;
      for (; k0 + 2 * kLanes <= cout; k0 += 2 * kLanes) weight_block<2>(vx, cin, dmx + k0, cout, dux + k0);
      if (k0 < cout) weight_block<1>(vx, cin, dmx + k0, cout, dux + k0);
    }
}

RINGTRAIN_FMA_CLONES void fused_products(const float* __restrict v, std::int64_t cin, const float* __restrict u,
                                         std::int64_t plane, std::int64_t cout, float* __restrict m) {
  for (int xi = 0; xi < kPoints; ++xi) {
    const float* vx = v + xi * cin;
    const float* ux = u + xi * plane;
    float* mx = m + xi * cout;
    std::int64_t k0 = 0;
    for (; k0 + 2 * kLanes <= cout; k0 += 2 * kLanes) block<2>(vx, cin, ux + k0, cout, mx + k0);
    if (k0 < cout) block<1>(vx, cin, ux + k0, cout, mx + k0);
  }
}

}  // namespace detail

using namespace detail;

void Conv3x3::convolve_fused(const float* src, std::int64_t cin, float* dst, std::int64_t cout, const float* u,
                             std::int64_t plane, const float* bias, bool relu) const {
  const std::int64_t h = shape_.height, w = shape_.width, groups = (tiles_ + kGroup - 1) / kGroup;
#pragma omp parallel
  {
    std::vector<float>& buf = scratch(static_cast<std::size_t>(kGroup * kPoints * (cin + cout)), 0);
    float* v = buf.data();
    float* m = v + kGroup * kPoints * cin;
#pragma omp for schedule(static)
    for (std::int64_t g = 0; g < groups; ++g) {
      const std::int64_t p0 = g * kGroup, count = std::min<std::int64_t>(kGroup, tiles_ - p0);
      if (count < kGroup) std::fill(v + count * kPoints * cin, v + kGroup * kPoints * cin, 0.f);
      for (std::int64_t t = 0; t < count; ++t)
        input_tile(src, cin / kLanes, h, w, tile_pos(p0 + t, tiles_h_, tiles_w_), v + t * kPoints * cin, cin);
      fused_products(v, cin, u, plane, cout, m);
      for (std::int64_t t = 0; t < count; ++t)
        output_tile(m + t * kPoints * cout, cout, cout / kLanes, h, w, tile_pos(p0 + t, tiles_h_, tiles_w_), bias,
                    relu, dst);
    }
  }
}

float* Conv3x3::backward_weights_fused(const float* src, const float* diff_dst, std::int64_t plane) const {
  const std::int64_t cin = shape_.in, cout = shape_.out, h = shape_.height, w = shape_.width;
  const std::int64_t blocks = (tiles_ + kBlockTiles - 1) / kBlockTiles, size = kPoints * plane;
  float* du = scratch(static_cast<std::size_t>(blocks * size), 1).data();  // the blocks' partial dU
#pragma omp parallel
  {
    std::vector<float>& buf = scratch(static_cast<std::size_t>(kWeightGroup * kPoints * (cin + cout)), 0);
    float* v = buf.data();
    float* dm = v + kWeightGroup * kPoints * cin;
#pragma omp for schedule(static)
    for (std::int64_t b = 0; b < blocks; ++b) {
      float* part = du + b * size;
      std::fill(part, part + size, 0.f);
      const std::int64_t end = std::min(tiles_, (b + 1) * kBlockTiles);
      for (std::int64_t p0 = b * kBlockTiles; p0 < end; p0 += kWeightGroup) {
        const std::int64_t count = std::min<std::int64_t>(kWeightGroup, end - p0);
        if (count < kWeightGroup) {
          std::fill(v + count * kPoints * cin, v + kWeightGroup * kPoints * cin, 0.f);
          std::fill(dm + count * kPoints * cout, dm + kWeightGroup * kPoints * cout, 0.f);
        }
        for (std::int64_t t = 0; t < count; ++t) {
          const TilePos pos = tile_pos(p0 + t, tiles_h_, tiles_w_);
          input_tile(src, cin / kLanes, h, w, pos, v + t * kPoints * cin, cin);
          diff_output_tile(diff_dst, cout / kLanes, h, w, pos, dm + t * kPoints * cout, cout);
        }
        fused_weight_products(v, cin, dm, cout, part, plane);
      }
    }
  }
  // The partials in block order, element by element.
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < size; ++i)
    for (std::int64_t b = 1; b < blocks; ++b) du[i] += du[b * size + i];
  return du;
}

}  // namespace ringtrain::winograd
