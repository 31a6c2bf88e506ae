// The alpha-beta-gamma predictions of AllreduceCostModel.h, round by round as the code
// sends (RingAllreduce.cpp, RabenseifnerAllreduce.cpp, HalvingDoublingAllreduce.cpp), the
// choice auto makes from them, and the tuning file.
#include "collectives/AllreduceCostModel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ringtrain {
namespace {

// The file's keys, in field order: one list, read and written alike.
struct Key {
  const char* name;
  double AllreduceCostModel::*field;
};
constexpr Key kKeys[] = {
    {"alpha_s", &AllreduceCostModel::alpha_s},
    {"beta_s_per_byte", &AllreduceCostModel::beta_s_per_byte},
    {"rendezvous_beta_s_per_byte", &AllreduceCostModel::rendezvous_beta_s_per_byte},
    {"gamma_s_per_byte", &AllreduceCostModel::gamma_s_per_byte},
    {"copy_s_per_byte", &AllreduceCostModel::copy_s_per_byte},
    {"eager_limit_bytes", &AllreduceCostModel::eager_limit_bytes},
    {"choice_margin", &AllreduceCostModel::choice_margin},
};

std::string key_list() {
  std::string list;
  for (const Key& k : kKeys) list += (list.empty() ? "" : ", ") + std::string(k.name);
  return list;
}

// rd without its fold: recursive doubling of the whole vector, or halving-doubling in whole
// messages of n/2, n/4, ... each way (above the eager limit they go by rendezvous).
double predict_rd(double n, int q, double rounds, const AllreduceCostModel& m,
                  bool whole_vector) {
  const auto link = [&](double size) {
    return size * (size > m.eager_limit_bytes ? m.rendezvous_beta_s_per_byte : m.beta_s_per_byte);
  };
  if (whole_vector) return rounds * (m.alpha_s + link(n) + n * m.gamma_s_per_byte);
  double t = 0;
  double message = n;
  for (int j = 1; j < q; j *= 2) {
    message /= 2;
    t += 2 * (m.alpha_s + link(message)) + message * m.gamma_s_per_byte;
  }
  return t;
}

}  // namespace

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
  const double qf = q;
  switch (algo) {
    case AllreduceAlgo::kRing:
      return 2 * (p - 1) * m.alpha_s +
             (p - 1) / p * (2 * w * m.beta_s_per_byte + n * m.gamma_s_per_byte);
    case AllreduceAlgo::kRabenseifner: {
      // The fold's whole vector travels in chunks below the eager limit, like the rounds.
      const double fold = q == ranks ? 0.0
                                     : 2 * (m.alpha_s + w * m.beta_s_per_byte) + n * m.gamma_s_per_byte;
      return 2 * rounds * m.alpha_s +
             (qf - 1) / qf * (2 * w * m.beta_s_per_byte + n * m.gamma_s_per_byte) + fold;
    }
    case AllreduceAlgo::kRecursiveDoubling: {
      if (compression != Compression::kNone)
        throw std::invalid_argument("predict_allreduce_seconds: rd moves fp32 only");
      const double whole = n > m.eager_limit_bytes ? m.rendezvous_beta_s_per_byte : m.beta_s_per_byte;
      const double fold =
          q == ranks ? 0.0 : 2 * (m.alpha_s + n * whole) + n * m.gamma_s_per_byte;
      const bool whole_vector =
          bytes <= doubling_max_bytes || bytes / 4 < static_cast<std::size_t>(q);
      return predict_rd(n, q, rounds, m, whole_vector) + fold;
    }
    default:
      break;
  }
  throw std::invalid_argument("predict_allreduce_seconds: no model for '" +
                              std::string(allreduce_algo_name(algo)) + "' (ring, rab, rd)");
}

AllreducePlan choose_by_cost_model(std::size_t bytes, int ranks, Compression compression,
                                   std::size_t doubling_max_bytes, const AllreduceCostModel& model) {
  // The order of preference on near-ties: the ring (the default, measured at every size and
  // node count), rd (measured below 4 MiB), rab (measured at 2 nodes only).
  AllreducePlan plan;
  plan.basis = "cost model";
  for (const AllreduceAlgo algo : {AllreduceAlgo::kRing, AllreduceAlgo::kRecursiveDoubling,
                                   AllreduceAlgo::kRabenseifner}) {
    if (algo == AllreduceAlgo::kRecursiveDoubling && compression != Compression::kNone) continue;
    plan.predicted_s.emplace_back(
        algo, predict_allreduce_seconds(algo, bytes, ranks, compression, doubling_max_bytes, model));
  }
  choose_within_margin(plan, model.choice_margin);
  return plan;
}

void choose_within_margin(AllreducePlan& plan, double margin) {
  if (plan.predicted_s.empty()) return;
  double fastest = plan.predicted_s.front().second;
  for (const auto& [algo, seconds] : plan.predicted_s) fastest = std::min(fastest, seconds);
  for (const auto& [algo, seconds] : plan.predicted_s) {
    if (seconds <= fastest * (1 + margin)) {
      plan.algo = algo;
      return;
    }
  }
}

AllreducePlan plan_hier_network(std::size_t slice_bytes, int nodes, int slices, Compression compression,
                                std::size_t doubling_max_bytes, const AllreduceCostModel& model) {
  if (nodes <= 1) return AllreducePlan{AllreduceAlgo::kRing, "cost model", {{AllreduceAlgo::kRing, 0.0}}};
  AllreduceCostModel shared = model;
  shared.beta_s_per_byte *= slices;
  shared.rendezvous_beta_s_per_byte *= slices;
  return choose_by_cost_model(slice_bytes, nodes, compression, doubling_max_bytes, shared);
}

double predict_hier_seconds(std::size_t bytes, int nodes, int slices, int max_ranks_per_node,
                            Compression compression, std::size_t doubling_max_bytes,
                            const AllreduceCostModel& m) {
  if (slices < 1 || max_ranks_per_node < slices)
    throw std::invalid_argument("predict_hier_seconds: need 1 <= slices <= max_ranks_per_node");
  const std::size_t floats = bytes / sizeof(float);
  const std::size_t slice = (floats + static_cast<std::size_t>(slices) - 1) / static_cast<std::size_t>(slices) *
                            sizeof(float);
  const AllreducePlan network = plan_hier_network(slice, nodes, slices, compression, doubling_max_bytes, m);
  double t = 0.0;
  for (const auto& [algo, seconds] : network.predicted_s)
    if (algo == network.algo) t = seconds;
  if (max_ranks_per_node == 1) return t;
  const double n = static_cast<double>(bytes);
  return t + 2 * n * m.copy_s_per_byte + (max_ranks_per_node - 1) * static_cast<double>(slice) * m.gamma_s_per_byte;
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
    bool known = false;
    for (const Key& k : kKeys) {
      if (key != k.name) continue;
      model.*k.field = value;
      known = true;
    }
    if (!known)
      throw std::runtime_error(where + "unknown key '" + key + "' (expected " + key_list() + ")");
  }
  if (in.bad()) throw std::runtime_error(path + ": read error");
  return model;
}

std::string cost_model_text(const AllreduceCostModel& model) {
  std::string text;
  for (const Key& k : kKeys) {
    char value[40];
    std::snprintf(value, sizeof value, "%.9g", model.*k.field);
    text += std::string(k.name) + " = " + value + "\n";
  }
  return text;
}

void write_cost_model(const AllreduceCostModel& model, const std::string& path,
                      const std::string& comment) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error(path + ": cannot write the tuning file");
  out << "# " << comment << "\n" << cost_model_text(model);
  if (!out) throw std::runtime_error(path + ": write failed");
}

AllreduceCostModel read_cost_model_everywhere(Communicator& comm, const std::string& path) {
  AllreduceCostModel model;
  // Each rank's outcome: "+", its path, a newline and the parameters as read; or "!" and
  // the error. Every rank builds the same message from the same gathered outcomes.
  std::string mine;
  try {
    if (!path.empty()) model = read_cost_model(path);
    mine = "+" + path + "\n" + cost_model_text(model);
  } catch (const std::exception& e) {
    mine = std::string("!") + e.what();
  }
  const std::vector<std::string> all = comm.allgather(mine);
  const auto values = [](const std::string& outcome) { return outcome.substr(outcome.find('\n') + 1); };
  std::string failed, failed_ranks, differ;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r][0] == '!') {
      if (failed.empty()) failed = all[r].substr(1);  // the lowest failing rank's reason
      failed_ranks += (failed_ranks.empty() ? "" : ", ") + std::to_string(r);
    }
    if (all[r][0] == '+' && all[0][0] == '+' && values(all[r]) != values(all[0]))
      differ += (differ.empty() ? "" : ", ") + std::to_string(r);
  }
  if (!failed.empty()) throw std::runtime_error("--tuning " + failed + " (on rank(s) " + failed_ranks + ")");
  if (!differ.empty()) {
    const std::string first = all[0].substr(1, all[0].find('\n') - 1);
    throw std::runtime_error("--tuning " + first + ": rank(s) " + differ +
                             " read other parameters than rank 0 (the file differs between nodes)");
  }
  return model;
}

}  // namespace ringtrain
