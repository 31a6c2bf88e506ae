// The agreed power-of-two scale of fp16 transport (see Fp16Range.h).
//
// Bound: a partial sum of the reduction holds at most `ranks` contributions, each of at
// most max_abs, so |partial| <= ranks * max_abs. Scaling by a power of two is exact in
// fp32 (outside the subnormal range), so unscaling the result restores the magnitudes
// and the only change is fp16's rounding of the scaled values.
#include "collectives/Fp16Range.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "collectives/MpiCheck.h"
#include "collectives/MpiWait.h"
#include "collectives/ReduceKernels.h"

namespace ringtrain {

AbsMax abs_max(std::span<const float> data) {
  // On the bit patterns: one integer max that vectorises without -ffast-math.
  std::uint32_t largest = 0;
  std::uint32_t largest_finite = 0;
  for (float v : data) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    bits &= 0x7FFFFFFFu;
    largest = std::max(largest, bits);
    largest_finite = std::max(largest_finite, bits < 0x7F800000u ? bits : 0u);
  }
  AbsMax result;
  std::memcpy(&result.value, &largest_finite, sizeof(float));
  result.non_finite = largest >= 0x7F800000u;
  return result;
}

float fp16_scale_for(float max_abs, int ranks) {
  if (!(max_abs > 0.0f) || !std::isfinite(max_abs)) return 1.0f;
  const double bound = static_cast<double>(max_abs) * std::max(ranks, 1);
  // Largest e with bound * 2^e <= 2^15.
  int e = 15 - static_cast<int>(std::ceil(std::log2(bound)));
  while (std::ldexp(bound, e) > 32768.0) --e;
  while (std::ldexp(bound, e + 1) <= 32768.0) ++e;
  e = std::clamp(e, -126, 126);
  return std::ldexp(1.0f, e);
}

float fp16_prescale(MPI_Comm comm, std::span<float> data, TrafficStats& stats) {
  int ranks = 1;
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm, &ranks));
  // Non-finite values are left to travel (fp16 has inf and NaN) and do not set the scale.
  float global = abs_max(data).value;
  MPI_Request request;
  RINGTRAIN_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &global, 1, MPI_FLOAT, MPI_MAX, comm, &request));
  timed_wait(&request, stats);
  stats.bytes_sent += sizeof(float);
  stats.bytes_received += sizeof(float);
  const float scale = fp16_scale_for(global, ranks);
  if (scale != 1.0f) scale_in_place(data.data(), data.size(), scale);
  return 1.0f / scale;
}

}  // namespace ringtrain
