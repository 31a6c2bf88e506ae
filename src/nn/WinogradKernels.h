// Winograd F(4x4, 3x3)'s per-tile kernels, shared by Winograd.cpp (the transforms and the
// chunked pipeline around sgemm) and WinogradFused.cpp (the point products of narrow layers).
// Internal to nn/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringtrain::winograd::detail {

constexpr int kAlpha = 6;             // input tile side
constexpr int kTile = 4;              // output tile side
constexpr int kPoints = kAlpha * kAlpha;
constexpr int kLanes = 8;             // channels in an nChw8c block
// Narrow layers (in and out at most this many channels) multiply V by U tile group by tile
// group (fused_products), each group's V and M in L1, instead of through 36 sgemms of depth
// in over chunks of tiles: at 16-32 channels those sgemms are too thin to pay for writing V
// and M out to L2 and beyond and reading them back.
constexpr std::int64_t kFusedChannels = 32;
constexpr int kGroup = 4;             // tiles per fused group (forward, backward-data)
constexpr int kWeightGroup = 8;       // tiles per fused group (backward-weights)
// Backward-weights sums the tiles of each block of this many into its own partial dU, then the
// partials in block order: the same bits for any thread count.
constexpr std::int64_t kBlockTiles = 128;

// Where tile t of a chunk lies: image n, top-left output pixel (y, x).
struct TilePos {
  std::int64_t n, y, x;
};

inline TilePos tile_pos(std::int64_t p, std::int64_t tiles_h, std::int64_t tiles_w) {
  const std::int64_t per_image = tiles_h * tiles_w, r = p % per_image;
  return {p / per_image, (r / tiles_w) * kTile, (r % tiles_w) * kTile};
}

// V = B^T d B for one tile and all channel blocks of src (nChw8c, h x w): d is the 6x6 input
// patch at (y - 1, x - 1) (zeros outside the image); v[xi * ld + c] for the 36 points xi.
void input_tile(const float* src, std::int64_t blocks, std::int64_t h, std::int64_t w, TilePos pos, float* v,
                std::int64_t ld);
// Y = A^T M A (+ bias, ReLU) for one tile and all channel blocks: m[xi * ld + k]; the 4x4
// output tile at (y, x) is stored into dst (nChw8c) where it lies inside the image.
void output_tile(const float* m, std::int64_t ld, std::int64_t blocks, std::int64_t h, std::int64_t w, TilePos pos,
                 const float* bias, bool relu, float* dst);

// dM = A dY A^T for one tile and all channel blocks (the transpose of output_tile, without
// bias): dY is the 4x4 diff_dst tile at (y, x), zeros outside the image; dm[xi * ld + k].
void diff_output_tile(const float* diff_dst, std::int64_t blocks, std::int64_t h, std::int64_t w, TilePos pos,
                      float* dm, std::int64_t ld);

// This thread's scratch buffer number slot (0 or 1) of at least floats floats, shared by every
// layer that runs on the thread (layers run one at a time).
std::vector<float>& scratch(std::size_t floats, int slot);

// M = V U at every point for kGroup tiles: v[(t * kPoints + xi) * cin + c] (all kGroup tiles
// filled; zeros for missing ones), u[xi * plane + c * cout + k], into m[(t * kPoints + xi) *
// cout + k]. Sums over c in order, so the result depends only on the data.
void fused_products(const float* v, std::int64_t cin, const float* u, std::int64_t plane, std::int64_t cout,
                    float* m);

// dU += V^T dM at every point for kWeightGroup tiles: v[(t * kPoints + xi) * cin + c],
// dm[(t * kPoints + xi) * cout + k] (zeros for missing tiles), du[xi * plane + c * cout + k].
void fused_weight_products(const float* v, std::int64_t cin, const float* dm, std::int64_t cout, float* du,
                           std::int64_t plane);

}  // namespace ringtrain::winograd::detail
