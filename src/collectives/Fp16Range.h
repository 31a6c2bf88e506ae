// fp16 transport keeps every value on the wire finite: before an fp16 all-reduce the
// ranks agree on a power-of-two scale that maps the largest possible partial sum into
// fp16's range, multiply by it, and divide it out at the end.
#pragma once

#include "collectives/Mpi.h"

#include <cstdint>
#include <span>

#include "collectives/TrafficStats.h"

namespace ringtrain {

// Largest |value| of the data's finite elements, as fp32 bits (finite non-negative floats
// order like their bits); non-finite elements are reported separately.
struct AbsMax {
  float value = 0.0f;
  bool non_finite = false;
};
AbsMax abs_max(std::span<const float> data);

// The power of two s with ranks * max_abs * s <= 2^15 (half of fp16's 65504, which leaves
// room for the rounding of partial sums), as large as that allows so that small values
// keep their bits; within 2^-126..2^126 (normal fp32 both ways); 1 when max_abs is 0.
float fp16_scale_for(float max_abs, int ranks);

// Collective over `comm`: every rank gets the same s for the global maximum, multiplies
// `data` by it and receives 1/s (exact) to multiply the result by. Non-finite values
// (already inf or NaN in fp32) travel as fp16 inf / NaN like in an fp32 sum.
float fp16_prescale(MPI_Comm comm, std::span<float> data, TrafficStats& stats);

}  // namespace ringtrain
