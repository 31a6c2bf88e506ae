// Flag values given as text: shapes, number lists, and the choice lists --help shows.
#include "FlagText.h"

#include <cstdio>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {

ImageShape parse_shape(const std::string& text, const char* flag) {
  int c = 0, h = 0, w = 0;
  char extra = 0;
  if (std::sscanf(text.c_str(), "%dx%dx%d%c", &c, &h, &w, &extra) != 3 || c <= 0 || h <= 0 || w <= 0) {
    throw std::invalid_argument(fmt::format("{} expects CxHxW with positive sizes, e.g. 3x32x32 (got '{}')", flag, text));
  }
  return {c, h, w};
}

std::vector<double> parse_list(const std::string& text, const char* flag) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      std::size_t used = 0;
      out.push_back(std::stod(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw std::invalid_argument(fmt::format("{} expects comma-separated numbers, e.g. 10,20 (got '{}')", flag, text));
    }
  }
  return out;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : "|") + n;
  return out;
}

}  // namespace ringtrain
