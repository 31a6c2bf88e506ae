// bf16 weights and the state bf16 kernels leave behind: after a bf16 forward and backward the
// upper halves of the vector registers are free again (the baseline SSE code that follows,
// the optimizer's loop, would otherwise run several times slower).
#include <catch2/catch.hpp>

#include <cpuid.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "layer_harness.h"
#include "nn/Model.h"
#include "nn/Precision.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

bool native_bf16() { return isa_has_native_bf16(effective_isa()); }

// XINUSE (XGETBV with ECX = 1) bits 2 and 6: the upper halves of ymm 0-15 and of zmm 0-15 are
// not in their initial state. nullopt where the CPU cannot report it.
std::optional<bool> upper_vector_state_in_use() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & bit_OSXSAVE) == 0) return std::nullopt;
  __cpuid_count(0xD, 1, eax, ebx, ecx, edx);
  if ((eax & (1u << 2)) == 0) return std::nullopt;
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
  return (lo & ((1u << 2) | (1u << 6))) != 0;
}

}  // namespace

TEST_CASE("A bf16 forward and backward leave the upper vector state clean", "[nn][bf16]") {
  if (!native_bf16() || !upper_vector_state_in_use()) {
    WARN("skipped: no native bf16, or the CPU does not report XINUSE");
    return;
  }
  // The MLP: oneDNN 2.6.3's bf16 inner-product backward returns with that state in use.
  Model m("mlp", {3, 8, 8}, 10);
  m.set_precision(Precision::kBf16);
  const int n = 4;
  const auto x = random_floats(3 * 8 * 8 * n, 5);
  const std::vector<std::int32_t> y{1, 2, 3, 4};
  for (int step = 0; step < 2; ++step) {
    m.forward(x.data(), y.data(), n, Phase::kTrain, 1);
    CHECK_FALSE(*upper_vector_state_in_use());
    m.backward();
    CHECK_FALSE(*upper_vector_state_in_use());
  }
}
