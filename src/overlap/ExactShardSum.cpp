// The exact, rank-count-independent sum of logical shards (ExactShardSum.h).
#include "overlap/ExactShardSum.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "collectives/StallRecord.h"
#include "common/CollectiveError.h"
#include "common/CpuDispatch.h"
#include "common/Seconds.h"

namespace ringtrain {
namespace {

using Clock = std::chrono::steady_clock;

// ceil(log2(n)) for n >= 1.
int ceil_log2(int n) {
  int bits = 0;
  while ((1LL << bits) < n) ++bits;
  return bits;
}

// The power of two 2^e with S x max_abs x 2^e < 2^51: max_abs = m 2^E with m in [0.5, 1),
// so max_abs < 2^E and e = 51 - E - ceil(log2 S). Every scaled value is then below 2^51 (what
// round_to_int needs) and any partial sum of S rounded values below 2^51 + S/2: far from
// int64's 2^63. A power of two makes g x 2^e exact in double (fp32's 24 significant bits,
// shifted), so the only rounding is round_to_int's.
double scale_for(double max_abs, int shards) {
  if (max_abs == 0.0) return 1.0;  // every value is 0: any scale gives 0
  int exponent = 0;
  std::frexp(max_abs, &exponent);
  return std::ldexp(1.0, 51 - exponent - ceil_log2(shards));
}

// round-to-nearest-even(x) for |x| < 2^51, with adds and integer ops only, so the loop below
// can vectorise (std::llround is a library call per value; with it, converting 4 shards of
// mlp's 1.5 M gradients took longer than their int64 all-reduce at np 2): x + 1.5 x 2^52 lies in
// [2^52, 2^53), where the doubles are exactly the integers, and its bit pattern exceeds that
// of 1.5 x 2^52 by round(x).
constexpr double kRoundMagic = 0x1.8p52;

inline std::int64_t round_to_int(double x) {
  const double shifted = x + kRoundMagic;
  std::int64_t bits = 0;
  std::int64_t magic_bits = 0;
  std::memcpy(&bits, &shifted, sizeof bits);
  std::memcpy(&magic_bits, &kRoundMagic, sizeof magic_bits);
  return bits - magic_bits;
}

// dst[j] = src[j] for j < n; returns the max of |src[j]|'s bit patterns. For a non-negative
// float the bit pattern orders like the value, and inf and NaN have the largest ones
// (>= 0x7f800000), so one integer max both finds max |g| exactly and flags a non-finite
// value; unlike a float max with NaN checks, it vectorises (the copy and the max in one pass).
RINGTRAIN_VECTOR_CLONES
std::uint32_t copy_max_abs_bits(const float* src, float* dst, std::size_t n) {
  std::uint32_t m = 0;
  for (std::size_t j = 0; j < n; ++j) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, src + j, sizeof bits);
    dst[j] = src[j];
    bits &= 0x7fffffffu;
    m = bits > m ? bits : m;
  }
  return m;
}

// acc[j] = round(g[j] x scale): the first shard, which saves zeroing acc first.
RINGTRAIN_VECTOR_CLONES
void set_fixed(const float* g, std::int64_t* acc, std::size_t n, double scale) {
  for (std::size_t j = 0; j < n; ++j) acc[j] = round_to_int(static_cast<double>(g[j]) * scale);
}

// acc[j] += round(g[j] x scale). One correctly rounded multiply and add per element, so the
// ISA clones give the same integers (CpuDispatch.h).
RINGTRAIN_VECTOR_CLONES
void add_fixed(const float* g, std::int64_t* acc, std::size_t n, double scale) {
  for (std::size_t j = 0; j < n; ++j) acc[j] += round_to_int(static_cast<double>(g[j]) * scale);
}

}  // namespace

ExactShardSum::ExactShardSum(Communicator& comm, std::vector<std::pair<std::size_t, std::size_t>> buckets,
                             std::size_t num_params, std::size_t num_buffers, int shards)
    : comm_(comm), buckets_(std::move(buckets)), num_params_(num_params), num_buffers_(num_buffers), shards_(shards) {
  const int p = comm_.size();
  if (shards_ < 1 || shards_ % p != 0) {
    throw std::invalid_argument(
        fmt::format("--logical-shards {} is not divisible by the {} ranks: run at a rank count that divides it",
                    shards_, p));
  }
  local_ = shards_ / p;
  first_ = comm_.rank() * local_;
  grads_.resize(static_cast<std::size_t>(local_) * num_params_);
  max_abs_.assign(buckets_.size(), 0.0);
  fixed_.resize(num_params_);
  slots_.resize(static_cast<std::size_t>(shards_) * num_buffers_);
  scales_.resize(buckets_.size());
}

void ExactShardSum::add(int i, std::span<const float> grads, std::span<const float> buffers) {
  if (i < 0 || i >= local_ || grads.size() != num_params_ || buffers.size() != num_buffers_) {
    throw std::logic_error(fmt::format("ExactShardSum::add: shard {} of {} with {} gradients and {} buffers", i,
                                       local_, grads.size(), buffers.size()));
  }
  if (i == 0) std::fill(max_abs_.begin(), max_abs_.end(), 0.0);
  float* dst = grads_.data() + static_cast<std::size_t>(i) * num_params_;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const auto [offset, count] = buckets_[b];
    const std::uint32_t bits = copy_max_abs_bits(grads.data() + offset, dst + offset, count);
    // inf and NaN become inf, which the max all-reduce carries to every rank.
    double m = std::numeric_limits<double>::infinity();
    if (bits < 0x7f800000u) {
      float f = 0.0f;
      std::memcpy(&f, &bits, sizeof f);
      m = static_cast<double>(f);
    }
    max_abs_[b] = std::max(max_abs_[b], m);
  }
  // Shard k's row; + 0.0 turns -0 into +0, so the sum with the other ranks' zeros cannot
  // depend on which rank holds the shard.
  double* row = slots_.data() + static_cast<std::size_t>(first_ + i) * num_buffers_;
  for (std::size_t j = 0; j < num_buffers_; ++j) row[j] = static_cast<double>(buffers[j]) + 0.0;
}

void ExactShardSum::agree(StepTotals& totals) {
  double values[4] = {totals.loss_sum, totals.correct, totals.count, totals.stop};
  StallRecord::instance().set_bucket(-1, static_cast<int>(buckets_.size()));  // stall watchdog
  comm_.allreduce_sum(std::span<double>(values));
  totals = {values[0], values[1], values[2], values[3]};
}

void ExactShardSum::exact_sum_of_bucket(std::size_t b, double max_abs) {
  const auto [offset, count] = buckets_[b];
  const double scale = scale_for(max_abs, shards_);
  scales_[b] = scale;
  for (int i = 0; i < local_; ++i) {
    const float* g = grads_.data() + static_cast<std::size_t>(i) * num_params_;
    if (i == 0) {
      set_fixed(g + offset, fixed_.data() + offset, count, scale);
    } else {
      add_fixed(g + offset, fixed_.data() + offset, count, scale);
    }
  }
}

SyncTimes ExactShardSum::reduce(std::span<float> grads, std::span<float> buffers) {
  if (grads.size() != num_params_ || buffers.size() != num_buffers_) {
    throw std::logic_error("ExactShardSum::reduce: buffers of another model");
  }
  const auto t0 = Clock::now();
  std::vector<double> max_abs = max_abs_;
  in_mpi([&] { comm_.allreduce_max(std::span<double>(max_abs)); });  // exact: a max of doubles in any order
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    if (!std::isfinite(max_abs[b])) {
      throw CollectiveError(fmt::format("a gradient became non-finite (gradient bucket {} of {}); lower --lr", b + 1,
                                        buckets_.size()));
    }
    exact_sum_of_bucket(b, max_abs[b]);
  }
  StallRecord::instance().set_bucket(0, static_cast<int>(buckets_.size()));
  in_mpi([&] { comm_.allreduce_sum(std::span<std::int64_t>(fixed_)); });
  StallRecord::instance().set_bucket(-1, static_cast<int>(buckets_.size()));  // later waits are in no bucket
  // Any fixed function of identical integers gives identical floats: q / (2^e S) in double.
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const auto [offset, count] = buckets_[b];
    const double divisor = scales_[b] * static_cast<double>(shards_);
    for (std::size_t j = offset; j < offset + count; ++j) {
      grads[j] = static_cast<float>(static_cast<double>(fixed_[j]) / divisor);
    }
  }
  if (num_buffers_ > 0) {
    in_mpi([&] { comm_.allreduce_sum(std::span<double>(slots_)); });  // each slot: one value plus zeros, exact
    for (std::size_t j = 0; j < num_buffers_; ++j) {
      double sum = 0.0;
      for (int k = 0; k < shards_; ++k) sum += slots_[static_cast<std::size_t>(k) * num_buffers_ + j];
      buffers[j] = static_cast<float>(sum / static_cast<double>(shards_));
    }
    std::fill(slots_.begin(), slots_.end(), 0.0);
  }
  SyncTimes t;
  const auto t1 = Clock::now();
  t.allreduce = seconds_between(t0, t1);
  t.exposed = t.allreduce;  // nothing runs beside it
  // MPI's reductions run inside its calls, so, as with --allreduce mpi, all their time counts
  // as waiting; the rest is this class's own work: the conversion both ways, the buffers'
  // average.
  t.wait = mpi_seconds_;
  t.convert = t.allreduce - mpi_seconds_;
  mpi_seconds_ = 0.0;
  t.slices.emplace_back(seconds_between(begin_time_, t0), seconds_between(begin_time_, t1));
  return t;
}

std::size_t ExactShardSum::wire_bytes() const noexcept {
  return num_params_ * sizeof(std::int64_t) + buckets_.size() * sizeof(double) +
         static_cast<std::size_t>(shards_) * num_buffers_ * sizeof(double);
}

}  // namespace ringtrain
