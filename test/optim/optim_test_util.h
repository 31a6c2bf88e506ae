// Shared fixtures for the optimizer tests: a small mixed parameter layout and helpers.
#pragma once

#include <cmath>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "nn/ParamInfo.h"
#include "optim/Optimizer.h"

namespace ringtrain::test {

// 12 floats: a weight [0,4), a bias [4,6), 2 floats of padding [6,8) that no tensor
// covers, BatchNorm scale [8,10) and shift [10,12). Listed out of offset order on purpose.
inline std::vector<ParamInfo> mixed_layout() {
  return {
      {"bn.scale", 8, 2, ParamKind::kNormScale, 1},
      {"fc.weight", 0, 4, ParamKind::kWeight, 0},
      {"bn.shift", 10, 2, ParamKind::kNormShift, 1},
      {"fc.bias", 4, 2, ParamKind::kBias, 0},
  };
}
constexpr std::size_t kMixedSize = 12;

inline bool is_padding(std::size_t i) { return i == 6 || i == 7; }

// What the references do with each float of a layout.
enum class Role { kUntouched, kDecay, kNoDecay };

// The mixed layout's roles: the weight always decays, biases and BatchNorm parameters
// only when decay_biases, the padding never changes.
inline std::vector<Role> mixed_roles(bool decay_biases) {
  std::vector<Role> roles(kMixedSize);
  for (std::size_t i = 0; i < kMixedSize; ++i) {
    roles[i] = is_padding(i) ? Role::kUntouched
               : (i < 4 || decay_biases) ? Role::kDecay
                                         : Role::kNoDecay;
  }
  return roles;
}

// The whole buffer as one weight tensor.
inline std::vector<ParamInfo> single_weight(std::size_t n) {
  return {{"w", 0, n, ParamKind::kWeight, 0}};
}

inline std::vector<float> random_vector(std::size_t n, std::mt19937& gen, float lo = -1,
                                        float hi = 1) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// float result against a double reference: relative 1e-5 with an absolute floor.
inline void require_close(const std::vector<float>& got, const std::vector<double>& want,
                          double rel = 1e-5, double abs = 1e-7) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("index " << i << ": got " << got[i] << ", want " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= abs + rel * std::abs(want[i]));
  }
}

}  // namespace ringtrain::test
