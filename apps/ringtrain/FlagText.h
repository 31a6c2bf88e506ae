// Flag values given as text: CxHxW shapes, comma-separated number lists, and the "a|b|c"
// lists --help shows for a flag's choices.
#pragma once

#include <string>
#include <vector>

#include "common/ImageShape.h"

namespace ringtrain {

// "3x32x32" -> {3, 32, 32}; throws std::invalid_argument naming `flag` unless all three are positive.
ImageShape parse_shape(const std::string& text, const char* flag);
// "10,20" -> {10, 20}; throws std::invalid_argument naming `flag` on anything but numbers.
std::vector<double> parse_list(const std::string& text, const char* flag);
// {"a", "b"} -> "a|b".
std::string joined(const std::vector<std::string>& names);

}  // namespace ringtrain
