// Test inputs whose sums are exact in fp32 whatever the order of summation: small integers
// derived from rank, index and call, and the index of the first element that is not the
// exact sum (or mean). Shared by the MPI all-reduce tests.
#pragma once

#include <cstddef>
#include <vector>

namespace ringtrain::test {

// Rank r's value at index i: an integer in [-8, 8] (distinct per rank and index pattern).
inline float value(int rank, std::size_t i, int call = 0) {
  return static_cast<float>(static_cast<int>((i * 31 + static_cast<std::size_t>(rank) * 17 +
                                              static_cast<std::size_t>(call) * 5) %
                                             17) -
                            8);
}

inline std::vector<float> filled(int rank, std::size_t count, int call = 0) {
  std::vector<float> data(count);
  for (std::size_t i = 0; i < count; ++i) data[i] = value(rank, i, call);
  return data;
}

// Index of the first mismatch against the exact sum (or mean), or -1.
inline long first_mismatch(const std::vector<float>& data, int ranks, bool mean, int call = 0) {
  const float scale = 1.0f / static_cast<float>(ranks);
  for (std::size_t i = 0; i < data.size(); ++i) {
    int sum = 0;
    for (int r = 0; r < ranks; ++r) sum += static_cast<int>(value(r, i, call));
    float expected = static_cast<float>(sum);
    if (mean) expected *= scale;
    if (data[i] != expected) return static_cast<long>(i);
  }
  return -1;
}

}  // namespace ringtrain::test
