// Attribute lookups on an ONNX node, with the ONNX defaults given by the caller. A wrong type
// throws std::invalid_argument naming the attribute (the importer adds file and node).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace onnx {
class NodeProto;
}

namespace ringtrain {

bool has_attribute(const onnx::NodeProto& n, const std::string& name);
std::int64_t int_attribute(const onnx::NodeProto& n, const std::string& name, std::int64_t fallback);
float float_attribute(const onnx::NodeProto& n, const std::string& name, float fallback);
std::string string_attribute(const onnx::NodeProto& n, const std::string& name, const std::string& fallback);
std::vector<std::int64_t> ints_attribute(const onnx::NodeProto& n, const std::string& name,
                                         const std::vector<std::int64_t>& fallback);

}  // namespace ringtrain
