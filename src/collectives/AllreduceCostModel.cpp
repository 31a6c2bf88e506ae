// The alpha-beta-gamma predictions of AllreduceCostModel.h, round by round as the code
// sends (RingAllreduce.cpp, RabenseifnerAllreduce.cpp, HalvingDoublingAllreduce.cpp).
#include "collectives/AllreduceCostModel.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace ringtrain {

double predict_allreduce_seconds(AllreduceAlgo algo, std::size_t bytes, int ranks,
                                 Compression compression, std::size_t doubling_max_bytes,
                                 const AllreduceCostModel& m) {
  if (ranks < 1) throw std::invalid_argument("predict_allreduce_seconds: ranks must be >= 1");
  if (ranks == 1 || bytes == 0) return 0.0;
  const double n = static_cast<double>(bytes);
  const double w = compression == Compression::kNone ? n : n / 2;
  const double p = ranks;
  int q = 1;
  while (q * 2 <= ranks) q *= 2;
  const double rounds = std::log2(static_cast<double>(q));
  const double fold = q == ranks ? 0.0 : 2 * (m.alpha_s + w * m.beta_s_per_byte) + n * m.gamma_s_per_byte;
  const double halving_doubling = 2 * rounds * m.alpha_s +
                                  2 * (q - 1) / static_cast<double>(q) * w * m.beta_s_per_byte +
                                  (q - 1) / static_cast<double>(q) * n * m.gamma_s_per_byte;
  switch (algo) {
    case AllreduceAlgo::kRing:
      return 2 * (p - 1) * m.alpha_s + 2 * (p - 1) / p * w * m.beta_s_per_byte +
             (p - 1) / p * n * m.gamma_s_per_byte;
    case AllreduceAlgo::kRabenseifner:
      return halving_doubling + fold;
    case AllreduceAlgo::kRecursiveDoubling:
      if (compression != Compression::kNone)
        throw std::invalid_argument("predict_allreduce_seconds: rd moves fp32 only");
      if (bytes <= doubling_max_bytes || bytes / 4 < static_cast<std::size_t>(q))
        return rounds * (m.alpha_s + n * m.beta_s_per_byte + n * m.gamma_s_per_byte) + fold;
      return halving_doubling + fold;
    default:
      break;
  }
  throw std::invalid_argument("predict_allreduce_seconds: no model for '" +
                              std::string(allreduce_algo_name(algo)) + "' (ring, rab, rd)");
}

}  // namespace ringtrain
