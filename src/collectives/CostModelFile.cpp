// The cost model's tuning file ("key = value" lines): read, written, and read on every rank
// with a check that all of them read the same parameters.
#include "collectives/CostModelFile.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
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
    {"shm_alpha_s", &AllreduceCostModel::shm_alpha_s},
    {"eager_limit_bytes", &AllreduceCostModel::eager_limit_bytes},
    {"choice_margin", &AllreduceCostModel::choice_margin},
    {"hier_margin", &AllreduceCostModel::hier_margin},
    {"lanes_margin", &AllreduceCostModel::lanes_margin},
};

std::string key_list() {
  std::string list;
  for (const Key& k : kKeys) list += (list.empty() ? "" : ", ") + std::string(k.name);
  return list;
}

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
