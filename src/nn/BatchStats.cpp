// BatchStats: per-channel mean and biased variance, two passes, fp32 runs summed in double.
//
// Every layout is read as panels: `rows` consecutive rows of `width` contiguous lanes, a lane
// being one channel (nChw8c, nChw16c: a channel block of one image; nhwc: the channels of one
// image) or an eighth of one channel's plane (nchw: the plane read 8 elements a row). Lanes are
// summed in fp32 over at most kRun rows, which the compiler turns into vector adds (AVX2 where
// the CPU has it), and those partial sums are added in double. The work is split over channels
// only, so the result does not depend on the number of threads. On one core it costs about what
// oneDNN's own statistics pass does (0.7-1.0x its training forward, less the normalisation).
#include "nn/BatchStats.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "common/CpuDispatch.h"

namespace ringtrain {

namespace {

using dnnl::memory;

constexpr std::int64_t kRun = 64;  // rows summed in fp32 before they go into the double sums

// Adds to s1[k] the sum of x[p * panel + r * row + k] - m[k] (m null: of x itself) over panels
// p < panels and rows r < rows and, with s2, to s2[k] the sum of its squares, for k < width.
// Lanes are independent and each operation rounds once (no FMA: src/CMakeLists.txt), so the
// AVX2 and baseline clones give the same bits. kWidth lanes (8 or 16: a channel block) sum in
// local arrays the compiler keeps in vector registers.
template <int kWidth>
RINGTRAIN_STREAM_CLONES void block_sums(const float* __restrict x, std::int64_t panels, std::int64_t panel,
                                        std::int64_t rows, std::int64_t row, const float* m, double* s1, double* s2) {
  for (std::int64_t p = 0; p < panels; ++p)
    for (std::int64_t r0 = 0; r0 < rows; r0 += kRun) {
      const std::int64_t r1 = std::min(rows, r0 + kRun);
      float a1[kWidth] = {}, a2[kWidth] = {};
      if (m == nullptr) {
        for (std::int64_t r = r0; r < r1; ++r)
          for (int k = 0; k < kWidth; ++k) a1[k] += x[p * panel + r * row + k];
      } else {
        float mk[kWidth];
        std::copy(m, m + kWidth, mk);
        for (std::int64_t r = r0; r < r1; ++r)
          for (int k = 0; k < kWidth; ++k) {
            const float d = x[p * panel + r * row + k] - mk[k];
            a1[k] += d;
            a2[k] += d * d;
          }
      }
      for (int k = 0; k < kWidth; ++k) s1[k] += a1[k];
      if (s2 != nullptr)
        for (int k = 0; k < kWidth; ++k) s2[k] += a2[k];
    }
}

// The same for a run-time width (nhwc: the channels of a slice), through buffers of it.
RINGTRAIN_STREAM_CLONES void wide_sums(const float* __restrict x, std::int64_t panels, std::int64_t panel,
                                       std::int64_t rows, std::int64_t row, int width, const float* m, double* s1,
                                       double* s2) {
  std::vector<float> buffers(2 * static_cast<std::size_t>(width));
  float* __restrict a1 = buffers.data();
  float* __restrict a2 = a1 + width;
  for (std::int64_t p = 0; p < panels; ++p)
    for (std::int64_t r0 = 0; r0 < rows; r0 += kRun) {
      const std::int64_t r1 = std::min(rows, r0 + kRun);
      std::fill(a1, a1 + 2 * width, 0.0f);
      for (std::int64_t r = r0; r < r1; ++r) {
        const float* __restrict v = x + p * panel + r * row;
        if (m == nullptr) {
          for (int k = 0; k < width; ++k) a1[k] += v[k];
        } else {
          for (int k = 0; k < width; ++k) {
            const float d = v[k] - m[k];
            a1[k] += d;
            a2[k] += d * d;
          }
        }
      }
      for (int k = 0; k < width; ++k) s1[k] += a1[k];
      if (s2 != nullptr)
        for (int k = 0; k < width; ++k) s2[k] += a2[k];
    }
}

enum class Layout { kNchw, kNhwc, kBlocked8, kBlocked16, kOther };

Layout layout_of(const memory::desc& md) {
  if (md.data_type() != memory::data_type::f32 || md.dims().size() != 4) return Layout::kOther;
  const memory::dims dims = md.dims();
  const std::pair<memory::format_tag, Layout> known[] = {{memory::format_tag::nchw, Layout::kNchw},
                                                         {memory::format_tag::nhwc, Layout::kNhwc},
                                                         {memory::format_tag::nChw8c, Layout::kBlocked8},
                                                         {memory::format_tag::nChw16c, Layout::kBlocked16}};
  for (const auto& [tag, layout] : known)
    if (md == memory::desc(dims, memory::data_type::f32, tag)) return layout;
  return Layout::kOther;
}

// Pass over `x` (m null: sums of x into s1; else of x - m[c] into s1 and its squares into s2),
// both set, not added to.
void channel_sums(Layout layout, const float* x, std::int64_t n, std::int64_t c, std::int64_t hw, const float* m,
                  double* s1, double* s2) {
  switch (layout) {
    case Layout::kBlocked8:
    case Layout::kBlocked16: {
      const int b = layout == Layout::kBlocked8 ? 8 : 16;
      const std::int64_t blocks = (c + b - 1) / b;
#pragma omp parallel for schedule(static)
      for (std::int64_t cb = 0; cb < blocks; ++cb) {
        const int valid = static_cast<int>(std::min<std::int64_t>(b, c - cb * b));
        double t1[16] = {}, t2[16] = {};
        float lane_mean[16] = {};
        if (m != nullptr) std::copy(m + cb * b, m + cb * b + valid, lane_mean);
        const float* p = x + cb * hw * b;  // image i's block cb: p + i * blocks * hw * b
        if (b == 8)
          block_sums<8>(p, n, blocks * hw * b, hw, b, m ? lane_mean : nullptr, t1, m ? t2 : nullptr);
        else
          block_sums<16>(p, n, blocks * hw * b, hw, b, m ? lane_mean : nullptr, t1, m ? t2 : nullptr);
        for (int k = 0; k < valid; ++k) {  // lanes past c are the block's padding
          s1[cb * b + k] = t1[k];
          if (s2 != nullptr) s2[cb * b + k] = t2[k];
        }
      }
      break;
    }
    case Layout::kNhwc: {
      // Channel slices of at most 256 lanes, one per thread at a time.
      const std::int64_t slice = 256, slices = (c + slice - 1) / slice;
      std::fill(s1, s1 + c, 0.0);
      if (s2 != nullptr) std::fill(s2, s2 + c, 0.0);
#pragma omp parallel for schedule(static)
      for (std::int64_t q = 0; q < slices; ++q) {
        const std::int64_t c0 = q * slice, w = std::min(slice, c - c0);
        wide_sums(x + c0, n, hw * c, hw, c, static_cast<int>(w), m ? m + c0 : nullptr, s1 + c0, s2 ? s2 + c0 : nullptr);
      }
      break;
    }
    case Layout::kNchw: {
#pragma omp parallel for schedule(static)
      for (std::int64_t ch = 0; ch < c; ++ch) {
        double t1[8] = {}, t2[8] = {}, tail1 = 0, tail2 = 0;
        float lane_mean[8];
        std::fill(lane_mean, lane_mean + 8, m ? m[ch] : 0.0f);
        const std::int64_t rows = hw / 8;
        block_sums<8>(x + ch * hw, n, c * hw, rows, 8, m ? lane_mean : nullptr, t1, m ? t2 : nullptr);
        for (std::int64_t i = 0; i < n; ++i) {
          const float* p = x + (i * c + ch) * hw;
          for (std::int64_t j = rows * 8; j < hw; ++j) {
            const float d = p[j] - (m ? m[ch] : 0.0f);
            tail1 += d;
            tail2 += static_cast<double>(d) * d;
          }
        }
        double a = tail1, q = tail2;
        for (int k = 0; k < 8; ++k) {
          a += t1[k];
          q += t2[k];
        }
        s1[ch] = a;
        if (s2 != nullptr) s2[ch] = q;
      }
      break;
    }
    case Layout::kOther:
      break;
  }
}

}  // namespace

bool BatchStats::supports(const memory::desc& md) { return layout_of(md) != Layout::kOther; }

void BatchStats::compute(const memory& src, float* mean, float* variance) {
  const memory::desc md = src.get_desc();
  const Layout layout = layout_of(md);
  if (layout == Layout::kOther) throw std::logic_error("BatchStats::compute: a layout supports() refuses");
  const memory::dims d = md.dims();
  const std::int64_t n = d[0], c = d[1], hw = d[2] * d[3];
  const double count = static_cast<double>(n * hw);
  const auto* x = static_cast<const float*>(src.get_data_handle());
  std::vector<double> s1(static_cast<std::size_t>(c)), s2(static_cast<std::size_t>(c));
  std::vector<float> m(static_cast<std::size_t>(c));
  channel_sums(layout, x, n, c, hw, nullptr, s1.data(), nullptr);
  for (std::int64_t k = 0; k < c; ++k) m[k] = static_cast<float>(s1[k] / count);
  channel_sums(layout, x, n, c, hw, m.data(), s1.data(), s2.data());
  for (std::int64_t k = 0; k < c; ++k) {
    // s1 = sum of (x - m): the rounding of m, taken back out of both figures.
    const double shift = s1[k] / count;
    mean[k] = static_cast<float>(m[k] + shift);
    variance[k] = static_cast<float>(std::max(0.0, s2[k] / count - shift * shift));
  }
}

}  // namespace ringtrain
