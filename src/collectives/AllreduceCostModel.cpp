// The alpha-beta-gamma predictions of AllreduceCostModel.h, round by round as the code
// sends (RingAllreduce.cpp, RabenseifnerAllreduce.cpp, HalvingDoublingAllreduce.cpp).
#include "collectives/AllreduceCostModel.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
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

namespace {

std::string trimmed(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t\r") - begin + 1);
}

}  // namespace

AllreduceCostModel read_cost_model(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open the tuning file");
  AllreduceCostModel model;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string where = path + ":" + std::to_string(number) + ": ";
    line = trimmed(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) throw std::runtime_error(where + "expected key = value");
    const std::string key = trimmed(line.substr(0, eq));
    const std::string text = trimmed(line.substr(eq + 1));
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !std::isfinite(value) || value < 0)
      throw std::runtime_error(where + key + " must be a finite number >= 0 (got '" + text + "')");
    if (key == "alpha_s") {
      model.alpha_s = value;
    } else if (key == "beta_s_per_byte") {
      model.beta_s_per_byte = value;
    } else if (key == "gamma_s_per_byte") {
      model.gamma_s_per_byte = value;
    } else {
      throw std::runtime_error(where + "unknown key '" + key +
                               "' (expected alpha_s, beta_s_per_byte or gamma_s_per_byte)");
    }
  }
  return model;
}

void write_cost_model(const AllreduceCostModel& model, const std::string& path,
                      const std::string& comment) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error(path + ": cannot write the tuning file");
  out.precision(9);
  out << "# " << comment << "\n"
      << "alpha_s = " << model.alpha_s << "\n"
      << "beta_s_per_byte = " << model.beta_s_per_byte << "\n"
      << "gamma_s_per_byte = " << model.gamma_s_per_byte << "\n";
  if (!out) throw std::runtime_error(path + ": write failed");
}

}  // namespace ringtrain
