// VZEROUPPER behind a run-time AVX check (see VectorState.h): the function carries a target
// attribute, so a build for the x86-64 baseline still has it.
#include "common/VectorState.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ringtrain {

#if defined(__x86_64__)
namespace {
__attribute__((target("avx"))) void vzeroupper() { _mm256_zeroupper(); }
}  // namespace

void clear_upper_vector_state() noexcept {
  static const bool has_avx = __builtin_cpu_supports("avx");
  if (has_avx) vzeroupper();
}
#else
void clear_upper_vector_state() noexcept {}
#endif

}  // namespace ringtrain
