// Deterministic, counter-derived randomness shared by every area.
//
// Every random stream in ringtrain (weight init, the sampler's permutation, augmentation,
// dropout masks) is derived from (seed, purpose, counters) rather than carried as hidden
// mutable state. A checkpoint therefore only needs the seed and the position (epoch,
// step) to resume bit-for-bit, and ranks agree without communicating.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace ringtrain {

// SplitMix64 finaliser (Steele, Lea, Flood 2014): a bijective 64-bit mixer.
constexpr std::uint64_t splitmix64(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Combines a seed and any number of counters into one stream key.
constexpr std::uint64_t derive_seed(std::uint64_t seed, std::initializer_list<std::uint64_t> parts) noexcept {
  std::uint64_t h = splitmix64(seed);
  for (std::uint64_t p : parts) h = splitmix64(h ^ splitmix64(p));
  return h;
}

// Purposes, so that streams for different uses never coincide.
enum class RngPurpose : std::uint64_t {
  kInit = 1,
  kShuffle = 2,
  kAugment = 3,
  kDropout = 4,
  kSynthetic = 5,
};

// xoshiro256** (Blackman, Vigna 2018): small, fast, good quality; seeded by SplitMix64.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) noexcept {
    std::uint64_t x = seed;
    for (auto& s : s_) {
      x += 0x9E3779B97F4A7C15ULL;
      s = splitmix64(x);
    }
  }

  std::uint64_t next() noexcept {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 24 bits, exactly representable as float.
  float uniform() noexcept { return static_cast<float>(next() >> 40) * 0x1.0p-24f; }

  // Uniform in [lo, hi).
  float uniform(float lo, float hi) noexcept { return lo + (hi - lo) * uniform(); }

  // Uniform integer in [0, n) without modulo bias (Lemire 2019).
  std::uint64_t below(std::uint64_t n) noexcept {
    if (n == 0) return 0;
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
    auto low = static_cast<std::uint64_t>(m);
    if (low < n) {
      const std::uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * n;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4]{};
};

}  // namespace ringtrain
