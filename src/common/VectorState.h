// Leaving wide-vector code cleanly: VZEROUPPER after library kernels that may leave the upper
// halves of the ymm/zmm registers in use, so the SSE code compiled for the x86-64 baseline
// that follows them runs at full speed.
#pragma once

namespace ringtrain {

// Zeroes the upper halves of ymm/zmm 0-15 (VZEROUPPER) on a CPU with AVX; nothing otherwise.
// Legacy-SSE instructions that run while those halves are in use pay a merge (a false
// dependency) on every write, which made the optimizer's loop 3.6x slower after oneDNN 2.6.3's
// bf16 inner-product backward (Model.cpp has the measurement). Costs one instruction.
void clear_upper_vector_state() noexcept;

}  // namespace ringtrain
