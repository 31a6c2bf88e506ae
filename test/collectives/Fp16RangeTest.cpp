// The fp16 transport's range scale and the largest finite magnitude it is taken from.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "collectives/Fp16Range.h"

using namespace ringtrain;

TEST_CASE("fp16 range scale: the largest power of two keeping ranks * max below 2^15") {
  for (float max_abs : {1e-30f, 1e-6f, 0.75f, 1.0f, 3.0f, 1000.0f, 65504.0f, 1e6f, 3e38f}) {
    for (int ranks : {1, 2, 3, 4, 64}) {
      const float s = fp16_scale_for(max_abs, ranks);
      int e = 0;
      CHECK(std::frexp(s, &e) == 0.5f);  // a power of two
      const double bound = static_cast<double>(max_abs) * ranks;
      INFO("max_abs " << max_abs << " ranks " << ranks << " scale " << s);
      CHECK(bound * s <= 32768.0);
      if (e - 1 < 126) CHECK(bound * s * 2.0 > 32768.0);  // maximal unless clamped
    }
  }
  CHECK(fp16_scale_for(0.0f, 4) == 1.0f);
  CHECK(fp16_scale_for(std::numeric_limits<float>::infinity(), 4) == 1.0f);
  CHECK(fp16_scale_for(1e-40f, 2) == std::ldexp(1.0f, 126));
}

TEST_CASE("abs_max finds the largest finite magnitude and flags inf and NaN") {
  std::vector<float> v{1.0f, -7.5f, 3.0f};
  CHECK(abs_max(v).value == 7.5f);
  CHECK_FALSE(abs_max(v).non_finite);
  v.push_back(std::numeric_limits<float>::infinity());
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  CHECK(abs_max(v).value == 7.5f);
  CHECK(abs_max(v).non_finite);
  CHECK(abs_max(std::vector<float>{}).value == 0.0f);
}
