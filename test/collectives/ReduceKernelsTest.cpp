// The vectorised reduction kernels against a naive double-precision loop, including
// lengths that leave a scalar tail and unaligned starts.
#include <catch2/catch.hpp>

#include <vector>

#include "collectives/ReduceKernels.h"

using namespace ringtrain;

TEST_CASE("reduce_add, reduce_add_scale and scale_in_place match a naive loop") {
  for (std::size_t n : {0u, 1u, 7u, 8u, 15u, 16u, 17u, 33u, 1000u, 4099u}) {
    for (std::size_t offset : {0u, 1u, 3u}) {
      std::vector<float> a(n + offset), b(n + offset);
      for (std::size_t i = 0; i < a.size(); ++i) {
        a[i] = static_cast<float>(static_cast<int>(i % 11) - 5) * 0.5f;
        b[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
      }
      std::vector<float> sum = a, sum_scaled = a, scaled = a;
      reduce_add(sum.data() + offset, b.data() + offset, n);
      reduce_add_scale(sum_scaled.data() + offset, b.data() + offset, n, 0.25f);
      scale_in_place(scaled.data() + offset, n, 0.25f);
      bool ok = true;
      for (std::size_t i = 0; i < a.size(); ++i) {
        const bool inside = i >= offset;
        const double s = inside ? static_cast<double>(a[i]) + b[i] : a[i];
        ok = ok && sum[i] == static_cast<float>(s);
        ok = ok && sum_scaled[i] == static_cast<float>(inside ? s * 0.25 : a[i]);
        ok = ok && scaled[i] == static_cast<float>(inside ? a[i] * 0.25 : a[i]);
      }
      CHECK(ok);
    }
  }
}
