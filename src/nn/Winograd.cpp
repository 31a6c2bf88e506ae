// Winograd F(4x4, 3x3): the transforms, and the chunked pipeline around oneDNN's sgemm.
//
// The transforms are Lavin and Gray's (2016) for the interpolation points 0, 1, -1, 2, -2
// and infinity:
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   G   = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
// Every transform runs on 8 lanes at once (an nChw8c pixel's channels, or 8 kernels), as AVX2
// and baseline clones compiled without contraction (the same bits on every CPU); the weights'
// once per parameter change.
#include "nn/Winograd.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "common/CpuDispatch.h"
#include "nn/Sgemm.h"
#include "nn/WinogradKernels.h"

namespace ringtrain::winograd {

namespace {

using namespace detail;
using ringtrain::detail::sgemm;

// Tiles per chunk: the chunk's V and M (36 x tiles x (in + out) floats) are sized to about
// this many bytes, so the sgemms read what the transforms just wrote from cache.
constexpr std::int64_t kChunkBytes = std::int64_t{4} << 20;
constexpr std::int64_t kMinTiles = 128, kMinBackwardWeightsTiles = 256;

// Eight floats as one value (GCC's vector extension: one AVX2 register in the avx2 clone, two SSE
// registers in the baseline one; element-wise IEEE operations either way, so the same bits).
// Loads and stores through it may be unaligned and alias floats.
typedef float v8 __attribute__((vector_size(32), aligned(4), may_alias));
// Always inlined, also at the sanitizer builds' -O1, where the calls cost more than the work.
#define RINGTRAIN_INLINE inline __attribute__((always_inline))
RINGTRAIN_INLINE const v8& load(const float* p) { return *reinterpret_cast<const v8*>(p); }
RINGTRAIN_INLINE v8& store(float* p) { return *reinterpret_cast<v8*>(p); }

// B^T x for the 6 values x[0 .. 5 * step] (the rows or the columns of a 6x6 tile).
RINGTRAIN_INLINE void bt6(const v8* x, std::int64_t step, v8* out, std::int64_t out_step) {
  const v8 d0 = x[0], d1 = x[step], d2 = x[2 * step], d3 = x[3 * step], d4 = x[4 * step], d5 = x[5 * step];
  out[0] = 4.f * d0 - 5.f * d2 + d4;
  out[out_step] = (d4 + d3) - 4.f * (d1 + d2);
  out[2 * out_step] = (d4 - d3) + 4.f * (d1 - d2);
  out[3 * out_step] = (d4 - d2) + 2.f * (d3 - d1);
  out[4 * out_step] = (d4 - d2) - 2.f * (d3 - d1);
  out[5 * out_step] = 4.f * d1 - 5.f * d3 + d5;
}

// A^T m for the 6 values m[0 .. 5 * step] into 4.
RINGTRAIN_INLINE void at6(const v8* m, std::int64_t step, v8* out, std::int64_t out_step) {
  const v8 m0 = m[0], m1 = m[step], m2 = m[2 * step], m3 = m[3 * step], m4 = m[4 * step], m5 = m[5 * step];
  const v8 s12 = m1 + m2, d12 = m1 - m2, s34 = m3 + m4, d34 = m3 - m4;
  out[0] = m0 + s12 + s34;
  out[out_step] = d12 + 2.f * d34;
  out[2 * out_step] = s12 + 4.f * s34;
  out[3 * out_step] = d12 + 8.f * d34 + m5;
}

// A q for the 4 values q[0 .. 3 * step] into 6 (the transpose of at6).
RINGTRAIN_INLINE void a4(const v8* q, std::int64_t step, v8* out, std::int64_t out_step) {
  const v8 q0 = q[0], q1 = q[step], q2 = q[2 * step], q3 = q[3 * step];
  const v8 e02 = q0 + q2, e13 = q1 + q3, f02 = q0 + 4.f * q2, f13 = q1 + 4.f * q3;
  out[0] = q0;
  out[out_step] = e02 + e13;
  out[2 * out_step] = e02 - e13;
  out[3 * out_step] = f02 + 2.f * f13;
  out[4 * out_step] = f02 - 2.f * f13;
  out[5 * out_step] = q3;
}

// G g for the 3 values g[0 .. 2 * step] into 6.
RINGTRAIN_INLINE void g3(const v8* g, std::int64_t step, v8* out, std::int64_t out_step) {
  const v8 g0 = g[0], g1 = g[step], g2 = g[2 * step], s02 = g0 + g2;
  out[0] = g0 * (1.f / 4);
  out[out_step] = -(s02 + g1) * (1.f / 6);
  out[2 * out_step] = -(s02 - g1) * (1.f / 6);
  out[3 * out_step] = g0 * (1.f / 24) + g1 * (1.f / 12) + g2 * (1.f / 6);
  out[4 * out_step] = g0 * (1.f / 24) - g1 * (1.f / 12) + g2 * (1.f / 6);
  out[5 * out_step] = g2;
}

// G^T e for the 6 values e[0 .. 5 * step] into 3 (the transpose of g3).
RINGTRAIN_INLINE void gt6(const v8* e, std::int64_t step, v8* out, std::int64_t out_step) {
  const v8 e0 = e[0], e1 = e[step], e2 = e[2 * step], e3 = e[3 * step], e4 = e[4 * step], e5 = e[5 * step];
  const v8 s12 = e1 + e2, d12 = e2 - e1, s34 = e3 + e4, d34 = e3 - e4;
  out[0] = e0 * (1.f / 4) - s12 * (1.f / 6) + s34 * (1.f / 24);
  out[out_step] = d12 * (1.f / 6) + d34 * (1.f / 12);
  out[2 * out_step] = (s34 - s12) * (1.f / 6) + e5;
}

// U = G g G^T for count 3x3 kernels g_i at kernels + i * stride (turned 180 degrees if
// turned), into u[xi * ld + i]: each of the 36 points' values is one contiguous run. Eight
// kernels at a time, one per lane; count is a multiple of 8.
RINGTRAIN_STREAM_CLONES void weight_rows(const float* __restrict kernels, std::int64_t count, std::int64_t stride,
                                         bool turned, float* __restrict u, std::int64_t ld) {
  for (std::int64_t k0 = 0; k0 < count; k0 += kLanes) {
    v8 g[3][3];
    for (int i = 0; i < 9; ++i)
      for (int l = 0; l < kLanes; ++l) g[i / 3][i % 3][l] = kernels[(k0 + l) * stride + (turned ? 8 - i : i)];
    v8 t[kAlpha][3];  // G g
    for (int j = 0; j < 3; ++j) g3(&g[0][j], 3, &t[0][j], 3);
    for (int i = 0; i < kAlpha; ++i) {
      v8 r[kAlpha];
      g3(t[i], 1, r, 1);
      for (int j = 0; j < kAlpha; ++j) store(u + (i * kAlpha + j) * ld + k0) = r[j];
    }
  }
}

// dg = G^T dU G for input channel c and every output channel k: du[xi * plane + c * cout + k],
// into the (out, in, 3, 3) gradient, eight output channels at a time.
RINGTRAIN_STREAM_CLONES void weight_grad_rows(const float* __restrict du, std::int64_t cin, std::int64_t cout,
                                              std::int64_t c, std::int64_t plane, float* __restrict dw) {
  for (std::int64_t k0 = 0; k0 < cout; k0 += kLanes) {
    v8 e[kAlpha][kAlpha];
    for (int xi = 0; xi < kPoints; ++xi) e[xi / kAlpha][xi % kAlpha] = load(du + xi * plane + c * cout + k0);
    v8 t[3][kAlpha];  // G^T dU
    for (int j = 0; j < kAlpha; ++j) gt6(&e[0][j], kAlpha, &t[0][j], kAlpha);
    v8 g[3][3];
    for (int i = 0; i < 3; ++i) gt6(t[i], 1, g[i], 1);
    for (int l = 0; l < kLanes; ++l) {
      float* out = dw + ((k0 + l) * cin + c) * 9;
      for (int i = 0; i < 9; ++i) out[i] = g[i / 3][i % 3][l];
    }
  }
}

// Tiles per chunk: about kChunkBytes of V and M, but at least min_tiles (the sgemms' rows, or
// for backward-weights their depth), which matters for wide layers.
std::int64_t chunk_tiles(std::int64_t cin, std::int64_t cout, std::int64_t tiles, std::int64_t min_tiles) {
  const std::int64_t per_tile = kPoints * (cin + cout) * static_cast<std::int64_t>(sizeof(float));
  return std::clamp<std::int64_t>(kChunkBytes / per_tile, std::min(min_tiles, tiles), tiles);
}

// Points' matrices 64 bytes apart beyond their size: at a power-of-two stride the 36 rows a
// weight transform writes (or reads) at once would share a cache set.
std::int64_t padded_plane(std::int64_t in, std::int64_t out) { return in * out + 16; }

}  // namespace

// Scratch shared by every layer that runs on this thread (layers run one at a time).
std::vector<float>& detail::scratch(std::size_t floats, int slot) {
  thread_local std::vector<float> bufs[2];
  std::vector<float>& buf = bufs[slot];
  if (buf.size() < floats) buf.resize(floats);
  return buf;
}

// dM = A dY A^T for one tile and all channel blocks (the transpose of output_tile, without
// bias): dY is the 4x4 diff_dst tile at (y, x), zeros outside the image; dm[xi * ld + k].
RINGTRAIN_STREAM_CLONES void detail::diff_output_tile(const float* __restrict diff_dst, std::int64_t blocks,
                                                      std::int64_t h, std::int64_t w, TilePos pos,
                                                      float* __restrict dm, std::int64_t ld) {
  for (std::int64_t kb = 0; kb < blocks; ++kb) {
    const float* img = diff_dst + ((pos.n * blocks + kb) * h) * w * kLanes;
    v8 q[kTile][kTile];
    for (int i = 0; i < kTile; ++i)
      for (int j = 0; j < kTile; ++j) {
        const std::int64_t y = pos.y + i, x = pos.x + j;
        q[i][j] = y < h && x < w ? load(img + (y * w + x) * kLanes) : v8{};
      }
    v8 t[kAlpha][kTile];  // A dY
    for (int j = 0; j < kTile; ++j) a4(&q[0][j], kTile, &t[0][j], kTile);
    for (int i = 0; i < kAlpha; ++i) {
      v8 r[kAlpha];
      a4(t[i], 1, r, 1);
      for (int j = 0; j < kAlpha; ++j) store(dm + (i * kAlpha + j) * ld + kb * kLanes) = r[j];
    }
  }
}

// V = B^T d B for one tile and all channel blocks: d is the 6x6 input patch at (y - 1, x - 1)
// (zeros outside the image); v[xi * ld + c] for the 36 points xi.
RINGTRAIN_STREAM_CLONES void detail::input_tile(const float* __restrict src, std::int64_t blocks, std::int64_t h,
                                                std::int64_t w, TilePos pos, float* __restrict v, std::int64_t ld) {
  const bool inside = pos.y >= 1 && pos.y + 5 <= h && pos.x >= 1 && pos.x + 5 <= w;
  for (std::int64_t cb = 0; cb < blocks; ++cb) {
    const float* img = src + ((pos.n * blocks + cb) * h) * w * kLanes;
    v8 d[kAlpha][kAlpha];
    for (int i = 0; i < kAlpha; ++i) {
      const std::int64_t y = pos.y - 1 + i;
      for (int j = 0; j < kAlpha; ++j) {
        const std::int64_t x = pos.x - 1 + j;
        d[i][j] = inside || (y >= 0 && y < h && x >= 0 && x < w) ? load(img + (y * w + x) * kLanes) : v8{};
      }
    }
    v8 t[kAlpha][kAlpha];  // B^T d
    for (int j = 0; j < kAlpha; ++j) bt6(&d[0][j], kAlpha, &t[0][j], kAlpha);
    for (int i = 0; i < kAlpha; ++i) {
      v8 r[kAlpha];
      bt6(t[i], 1, r, 1);
      for (int j = 0; j < kAlpha; ++j) store(v + (i * kAlpha + j) * ld + cb * kLanes) = r[j];
    }
  }
}

// Y = A^T M A (+ bias, ReLU) for one tile and all channel blocks: m[xi * ld + k]; the 4x4
// output tile at (y, x) is stored where it lies inside the image.
RINGTRAIN_STREAM_CLONES void detail::output_tile(const float* __restrict m, std::int64_t ld, std::int64_t blocks,
                                                 std::int64_t h, std::int64_t w, TilePos pos,
                                                 const float* __restrict bias, bool relu, float* __restrict dst) {
  const v8 zero{};
  for (std::int64_t kb = 0; kb < blocks; ++kb) {
    v8 in[kAlpha][kAlpha];
    for (int xi = 0; xi < kPoints; ++xi) in[xi / kAlpha][xi % kAlpha] = load(m + xi * ld + kb * kLanes);
    v8 t[kTile][kAlpha];  // A^T M
    for (int j = 0; j < kAlpha; ++j) at6(&in[0][j], kAlpha, &t[0][j], kAlpha);
    const v8 b = bias ? load(bias + kb * kLanes) : zero;
    float* img = dst + ((pos.n * blocks + kb) * h) * w * kLanes;
    for (int i = 0; i < kTile && pos.y + i < h; ++i) {
      v8 o[kTile];
      at6(t[i], 1, o, 1);
      for (int j = 0; j < kTile && pos.x + j < w; ++j) {
        v8 r = o[j];
        if (bias) r += b;
        if (relu) r = r < zero ? zero : r;
        store(img + ((pos.y + i) * w + pos.x + j) * kLanes) = r;
      }
    }
  }
}

bool applies(int in, int out, int kernel, int stride, int pad, int dilation, int groups) {
  return kernel == 3 && stride == 1 && pad == 1 && dilation == 1 && groups == 1 && in % kLanes == 0 &&
         out % kLanes == 0 && in >= 2 * kLanes && out >= 2 * kLanes;
}

bool worthwhile(const Shape& s) { return s.batch * s.height * s.width >= 256; }

Weights::Weights(std::int64_t in, std::int64_t out) : in_(in), out_(out), plane_(padded_plane(in, out)) {
  if (in <= 0 || out <= 0 || in % kLanes != 0 || out % kLanes != 0)
    throw std::invalid_argument(fmt::format("winograd: {} -> {} channels, not multiples of 8", in, out));
  fwd_.resize(static_cast<std::size_t>(kPoints * plane_));
  bwd_.resize(fwd_.size());
}

void Weights::set(const float* weights) {
  const std::int64_t cin = in_, cout = out_;
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < cin; ++c)  // fwd_[xi][c][k]: kernels (k, c) for every k
    weight_rows(weights + c * 9, cout, cin * 9, false, fwd_.data() + c * cout, plane_);
#pragma omp parallel for schedule(static)
  for (std::int64_t k = 0; k < cout; ++k)  // bwd_[xi][k][c]: kernels (k, c) for every c
    weight_rows(weights + k * cin * 9, cin, 9, true, bwd_.data() + k * cin, plane_);
}

Conv3x3::Conv3x3(const Shape& s) : shape_(s) {
  if (s.batch <= 0 || s.height <= 0 || s.width <= 0 || s.in <= 0 || s.out <= 0 || s.in % kLanes != 0 ||
      s.out % kLanes != 0)
    throw std::invalid_argument(fmt::format("winograd: unsupported shape {}x{}x{}x{} -> {} channels", s.batch, s.in,
                                            s.height, s.width, s.out));
  tiles_h_ = (s.height + kTile - 1) / kTile;
  tiles_w_ = (s.width + kTile - 1) / kTile;
  tiles_ = s.batch * tiles_h_ * tiles_w_;
}

void Conv3x3::convolve(const float* src, std::int64_t cin, float* dst, std::int64_t cout, const float* u,
                       std::int64_t plane, const float* bias, bool relu) const {
  const std::int64_t h = shape_.height, w = shape_.width;
  if (cin <= kFusedChannels && cout <= kFusedChannels)
    return convolve_fused(src, cin, dst, cout, u, plane, bias, relu);
  const std::int64_t chunk = chunk_tiles(cin, cout, tiles_, kMinTiles);
  std::vector<float>& buf = scratch(static_cast<std::size_t>(kPoints * chunk * (cin + cout)), 0);
  float* v = buf.data();
  float* m = v + kPoints * chunk * cin;
  for (std::int64_t p0 = 0; p0 < tiles_; p0 += chunk) {
    const std::int64_t count = std::min(chunk, tiles_ - p0);
#pragma omp parallel for schedule(static)
    for (std::int64_t t = 0; t < count; ++t)
      input_tile(src, cin / kLanes, h, w, tile_pos(p0 + t, tiles_h_, tiles_w_), v + t * cin, count * cin);
    for (int xi = 0; xi < kPoints; ++xi)
      sgemm('N', 'N', count, cout, cin, v + xi * count * cin, cin, u + xi * plane, cout, 0.f,
            m + xi * count * cout, cout);
#pragma omp parallel for schedule(static)
    for (std::int64_t t = 0; t < count; ++t)
      output_tile(m + t * cout, count * cout, cout / kLanes, h, w, tile_pos(p0 + t, tiles_h_, tiles_w_), bias, relu,
                  dst);
  }
}

void Conv3x3::forward(const Weights& w, const float* src, float* dst, const float* bias, bool relu) const {
  convolve(src, shape_.in, dst, shape_.out, w.forward(), w.plane(), bias, relu);
}

void Conv3x3::backward_data(const Weights& w, const float* diff_dst, float* diff_src) const {
  convolve(diff_dst, shape_.out, diff_src, shape_.in, w.backward_data(), w.plane(), nullptr, false);
}

float* Conv3x3::backward_weights_chunked(const float* src, const float* diff_dst, std::int64_t plane) const {
  const std::int64_t cin = shape_.in, cout = shape_.out, h = shape_.height, w = shape_.width;
  const std::int64_t chunk = chunk_tiles(cin, cout, tiles_, kMinBackwardWeightsTiles);
  std::vector<float>& buf = scratch(static_cast<std::size_t>(kPoints * (chunk * (cin + cout) + plane)), 0);
  float* v = buf.data();
  float* dm = v + kPoints * chunk * cin;
  float* du = dm + kPoints * chunk * cout;  // [36][in][out]
  for (std::int64_t p0 = 0; p0 < tiles_; p0 += chunk) {
    const std::int64_t count = std::min(chunk, tiles_ - p0);
#pragma omp parallel for schedule(static)
    for (std::int64_t t = 0; t < count; ++t) {
      const TilePos pos = tile_pos(p0 + t, tiles_h_, tiles_w_);
      input_tile(src, cin / kLanes, h, w, pos, v + t * cin, count * cin);
      diff_output_tile(diff_dst, cout / kLanes, h, w, pos, dm + t * cout, count * cout);
    }
    for (int xi = 0; xi < kPoints; ++xi)
      sgemm('T', 'N', cin, cout, count, v + xi * count * cin, cin, dm + xi * count * cout, cout, p0 == 0 ? 0.f : 1.f,
            du + xi * plane, cout);
  }
  return du;
}

void Conv3x3::backward_weights(const float* src, const float* diff_dst, float* diff_weights,
                               float* diff_bias) const {
  const std::int64_t cin = shape_.in, cout = shape_.out, h = shape_.height, w = shape_.width;
  const std::int64_t plane = padded_plane(cin, cout);
  const float* du = cin <= kFusedChannels && cout <= kFusedChannels ? backward_weights_fused(src, diff_dst, plane)
                                                                     : backward_weights_chunked(src, diff_dst, plane);
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < cin; ++c) weight_grad_rows(du, cin, cout, c, plane, diff_weights);
  if (!diff_bias) return;
  const std::int64_t blocks = cout / kLanes, pixels = h * w;
#pragma omp parallel for schedule(static)
  for (std::int64_t kb = 0; kb < blocks; ++kb) {
    double sum[kLanes] = {};
    for (std::int64_t n = 0; n < shape_.batch; ++n) {
      const float* img = diff_dst + (n * blocks + kb) * pixels * kLanes;
      for (std::int64_t i = 0; i < pixels; ++i)
        for (int l = 0; l < kLanes; ++l) sum[l] += img[i * kLanes + l];
    }
    for (int l = 0; l < kLanes; ++l) diff_bias[kb * kLanes + l] = static_cast<float>(sum[l]);
  }
}

}  // namespace ringtrain::winograd
