// Learning-rate schedules (constant, step, multistep, cosine) with linear warmup, the
// linear scaling rule and the milestone-list parser.
#include "optim/LrSchedule.h"

#include <charconv>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace ringtrain {
namespace {

// How early a boundary counts as reached, in epochs: far below one step of any real run,
// far above the rounding of epoch + step / steps_per_epoch.
constexpr double kEpochTolerance = 1e-9;

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

bool finite_nonnegative(double x) { return std::isfinite(x) && x >= 0; }
bool finite_positive(double x) { return std::isfinite(x) && x > 0; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

const std::vector<std::string>& LrSchedule::known_names() {
  static const std::vector<std::string> kNames = {"constant", "step", "multistep", "cosine"};
  return kNames;
}

LrSchedule::LrSchedule(LrScheduleConfig config) : config_(std::move(config)) {
  const LrScheduleConfig& c = config_;
  const std::string& n = c.name;
  const bool known = n == "constant" || n == "step" || n == "multistep" || n == "cosine";
  require(known, fmt::format("unknown lr schedule \"{}\" (expected one of: {})", n,
                             fmt::join(known_names(), ", ")));
  require(finite_nonnegative(c.base_lr),
          fmt::format("lr schedule: base_lr must be finite and >= 0, got {}", c.base_lr));
  require(finite_nonnegative(c.warmup_epochs),
          fmt::format("lr schedule: warmup_epochs must be finite and >= 0, got {}",
                      c.warmup_epochs));
  require(c.warmup_start_factor >= 0 && c.warmup_start_factor <= 1,
          fmt::format("lr schedule: warmup_start_factor must be in [0, 1], got {}",
                      c.warmup_start_factor));
  if (n == "step" || n == "multistep") {
    require(finite_positive(c.gamma),
            fmt::format("lr schedule {}: gamma must be finite and > 0, got {}", n, c.gamma));
  }
  if (n == "step") {
    require(finite_positive(c.step_epochs),
            fmt::format("lr schedule step: step_epochs must be finite and > 0, got {}",
                        c.step_epochs));
  }
  if (n == "multistep") {
    require(!c.milestones.empty(), "lr schedule multistep: needs at least one milestone");
    for (std::size_t i = 0; i < c.milestones.size(); ++i) {
      require(finite_nonnegative(c.milestones[i]),
              fmt::format("lr schedule multistep: milestone {} must be finite and >= 0, got {}",
                          i + 1, c.milestones[i]));
      require(i == 0 || c.milestones[i] > c.milestones[i - 1],
              fmt::format("lr schedule multistep: milestones must increase, got {} after {}",
                          c.milestones[i], i == 0 ? 0.0 : c.milestones[i - 1]));
    }
  }
  if (n == "cosine") {
    require(finite_positive(c.total_epochs),
            fmt::format("lr schedule cosine: total_epochs must be finite and > 0, got {}",
                        c.total_epochs));
    require(std::isfinite(c.min_lr) && c.min_lr >= 0 && c.min_lr <= c.base_lr,
            fmt::format("lr schedule cosine: min_lr must be in [0, base_lr = {}], got {}",
                        c.base_lr, c.min_lr));
    require(c.warmup_epochs < c.total_epochs,
            fmt::format("lr schedule cosine: warmup_epochs ({}) must be < total_epochs ({})",
                        c.warmup_epochs, c.total_epochs));
  }
}

double LrSchedule::schedule(double e) const {
  const LrScheduleConfig& c = config_;
  if (c.name == "step") {
    return c.base_lr * std::pow(c.gamma, std::floor((e + kEpochTolerance) / c.step_epochs));
  }
  if (c.name == "multistep") {
    int passed = 0;
    for (double m : c.milestones) passed += e + kEpochTolerance >= m ? 1 : 0;
    return c.base_lr * std::pow(c.gamma, passed);
  }
  if (c.name == "cosine") {
    if (e + kEpochTolerance >= c.total_epochs) return c.min_lr;
    const double cosine = std::cos(std::numbers::pi * e / c.total_epochs);
    return c.min_lr + (c.base_lr - c.min_lr) * (1.0 + cosine) / 2.0;
  }
  return c.base_lr;  // constant
}

double LrSchedule::lr(double epoch) const {
  require(finite_nonnegative(epoch),
          fmt::format("lr schedule: epoch must be finite and >= 0, got {}", epoch));
  const LrScheduleConfig& c = config_;
  if (epoch + kEpochTolerance >= c.warmup_epochs) return schedule(epoch);
  const double f = c.warmup_start_factor;
  return schedule(c.warmup_epochs) * (f + (1.0 - f) * epoch / c.warmup_epochs);
}

double scale_lr_linear(double base_lr, double global_batch, double base_batch) {
  require(finite_nonnegative(base_lr),
          fmt::format("scale_lr_linear: base_lr must be finite and >= 0, got {}", base_lr));
  require(finite_positive(global_batch) && finite_positive(base_batch),
          fmt::format("scale_lr_linear: batch sizes must be > 0, got global {} and base {}",
                      global_batch, base_batch));
  return base_lr * global_batch / base_batch;
}

double fractional_epoch(std::int64_t epoch, std::int64_t step, std::int64_t steps_per_epoch) {
  require(epoch >= 0 && step >= 0 && steps_per_epoch > 0,
          fmt::format("fractional_epoch: needs epoch >= 0, step >= 0 and steps_per_epoch > 0, "
                      "got {}, {}, {}", epoch, step, steps_per_epoch));
  return static_cast<double>(epoch) +
         static_cast<double>(step) / static_cast<double>(steps_per_epoch);
}

std::vector<double> parse_milestones(std::string_view text) {
  std::vector<double> milestones;
  if (trim(text).empty()) return milestones;
  std::size_t start = 0;
  for (std::size_t item = 1;; ++item) {
    const std::size_t comma = text.find(',', start);
    const std::string_view raw =
        trim(text.substr(start, comma == std::string_view::npos ? text.npos : comma - start));
    const std::string where = fmt::format("milestones \"{}\": item {}", text, item);
    require(!raw.empty(), where + " is empty");
    double value = 0;
    const auto [end, ec] = std::from_chars(raw.data(), raw.data() + raw.size(), value);
    require(ec == std::errc() && end == raw.data() + raw.size(),
            fmt::format("{} (\"{}\") is not a number", where, raw));
    require(finite_nonnegative(value),
            fmt::format("{} ({}) must be finite and >= 0", where, value));
    require(milestones.empty() || value > milestones.back(),
            fmt::format("{} ({}) must be greater than the one before ({})", where, value,
                        milestones.empty() ? 0.0 : milestones.back()));
    milestones.push_back(value);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return milestones;
}

}  // namespace ringtrain
