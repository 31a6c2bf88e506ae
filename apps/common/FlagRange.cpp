// Bounds on a number flag, in words a person would write (FlagRange.h).
#include "FlagRange.h"

#include <cstdlib>
#include <limits>
#include <string>

#include <fmt/format.h>

namespace ringtrain {
namespace {

// A validator of `text` (the flag's value as given) against [min, max]; `expected` says
// what the flag takes ("must be " + expected), in --help too.
CLI::Validator bounded(double min, double max, const std::string& expected) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0') return fmt::format("must be a number {} (got '{}')", expected, text);
        // Written so that NaN fails too.
        if (!(value >= min && value <= max)) return fmt::format("must be {} (got {})", expected, text);
        return std::string();
      },
      "(" + expected + ")");
}

}  // namespace

CLI::Validator at_least(double min) {
  return bounded(min, std::numeric_limits<double>::infinity(), fmt::format(">= {}", min));
}

CLI::Validator from_to(double min, double max) {
  return bounded(min, max, fmt::format("from {} to {}", min, max));
}

}  // namespace ringtrain
