// Attribute lookups on an ONNX node.
#include "onnx/OnnxAttributes.h"

#include <stdexcept>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

namespace ringtrain {
namespace {

const onnx::AttributeProto* find(const onnx::NodeProto& n, const std::string& name,
                                 onnx::AttributeProto::AttributeType type, const char* expected) {
  for (const auto& a : n.attribute()) {
    if (a.name() != name) continue;
    if (a.type() != type) throw std::invalid_argument(fmt::format("attribute {}: expected {}", name, expected));
    return &a;
  }
  return nullptr;
}

}  // namespace

bool has_attribute(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return true;
  return false;
}

std::int64_t int_attribute(const onnx::NodeProto& n, const std::string& name, std::int64_t fallback) {
  const auto* a = find(n, name, onnx::AttributeProto::INT, "an integer");
  return a ? a->i() : fallback;
}

float float_attribute(const onnx::NodeProto& n, const std::string& name, float fallback) {
  const auto* a = find(n, name, onnx::AttributeProto::FLOAT, "a float");
  return a ? a->f() : fallback;
}

std::string string_attribute(const onnx::NodeProto& n, const std::string& name, const std::string& fallback) {
  const auto* a = find(n, name, onnx::AttributeProto::STRING, "a string");
  return a ? a->s() : fallback;
}

std::vector<std::int64_t> ints_attribute(const onnx::NodeProto& n, const std::string& name,
                                         const std::vector<std::int64_t>& fallback) {
  const auto* a = find(n, name, onnx::AttributeProto::INTS, "a list of integers");
  return a ? std::vector<std::int64_t>(a->ints().begin(), a->ints().end()) : fallback;
}

}  // namespace ringtrain
