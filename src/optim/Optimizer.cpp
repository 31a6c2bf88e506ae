// Optimizer::create: hyper-parameter validation and dispatch to SGD, Adam/AdamW and LARS.
#include "optim/Optimizer.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "optim/Adam.h"
#include "optim/Lars.h"
#include "optim/Sgd.h"

namespace ringtrain {
namespace {

// Throws unless lo <= value < hi (value <= hi when hi_inclusive); NaN always fails.
void require_range(const std::string& optimizer, const char* option, double value, double lo,
                   double hi, bool hi_inclusive) {
  const bool ok = value >= lo && (hi_inclusive ? value <= hi : value < hi);
  if (!ok) {
    throw std::invalid_argument(fmt::format("optimizer {}: {} must be in [{}, {}{}, got {}",
                                            optimizer, option, lo, hi,
                                            hi_inclusive ? "]" : ")", value));
  }
}

void require_nonnegative(const std::string& optimizer, const char* option, double value) {
  if (!(std::isfinite(value) && value >= 0)) {
    throw std::invalid_argument(fmt::format(
        "optimizer {}: {} must be finite and >= 0, got {}", optimizer, option, value));
  }
}

}  // namespace

const std::vector<std::string>& Optimizer::known_names() {
  static const std::vector<std::string> kNames = {"sgd", "adam", "adamw", "lars"};
  return kNames;
}

void validate_optimizer_config(const OptimizerConfig& c) {
  const std::string& n = c.name;
  const bool sgd = n == "sgd", adam = n == "adam" || n == "adamw", lars = n == "lars";
  if (!sgd && !adam && !lars) {
    throw std::invalid_argument(fmt::format("unknown optimizer \"{}\" (expected one of: {})", n,
                                            fmt::join(Optimizer::known_names(), ", ")));
  }
  require_nonnegative(n, "weight_decay", c.weight_decay);
  if (sgd || lars) require_range(n, "momentum", c.momentum, 0.0, 1.0, false);
  if (sgd) {
    require_range(n, "dampening", c.dampening, 0.0, 1.0, true);
    if (c.nesterov && (c.momentum <= 0 || c.dampening != 0)) {
      throw std::invalid_argument(fmt::format(
          "optimizer sgd: nesterov requires momentum > 0 and dampening 0, got momentum {} "
          "and dampening {}", c.momentum, c.dampening));
    }
  } else {
    if (c.nesterov) {
      throw std::invalid_argument(fmt::format("optimizer {}: nesterov applies to sgd only", n));
    }
    if (c.dampening != 0) {
      throw std::invalid_argument(fmt::format("optimizer {}: dampening applies to sgd only", n));
    }
  }
  if (adam) {
    require_range(n, "beta1", c.beta1, 0.0, 1.0, false);
    require_range(n, "beta2", c.beta2, 0.0, 1.0, false);
    // eps > 0 (PyTorch allows 0): with eps 0 a parameter whose gradient is still all zero
    // would get 0 / 0 = NaN.
    if (!(std::isfinite(c.eps) && c.eps > 0)) {
      throw std::invalid_argument(
          fmt::format("optimizer {}: eps must be finite and > 0, got {}", n, c.eps));
    }
  }
  if (lars && !(std::isfinite(c.lars_eta) && c.lars_eta > 0)) {
    throw std::invalid_argument(
        fmt::format("optimizer lars: lars_eta must be finite and > 0, got {}", c.lars_eta));
  }
}

std::unique_ptr<Optimizer> Optimizer::create(const OptimizerConfig& config,
                                             std::span<const ParamInfo> params,
                                             std::size_t num_params) {
  validate_optimizer_config(config);
  if (config.name == "sgd") return std::make_unique<Sgd>(config, params, num_params);
  if (config.name == "lars") return std::make_unique<Lars>(config, params, num_params);
  return std::make_unique<Adam>(config, params, num_params);
}

}  // namespace ringtrain
