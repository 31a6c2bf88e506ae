// OnnxTensor: an initializer or Constant decoded from its TensorProto (float or integer data,
// raw or typed), checked against its dims before anything is copied.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace onnx {
class TensorProto;
}

namespace ringtrain {

struct OnnxTensor {
  std::vector<std::int64_t> dims;
  bool is_float = true;            // else integer (INT64 / INT32 / BOOL), in ints
  bool has_data = false;           // false: dims only (a graph without weights)
  std::vector<float> floats;       // FLOAT data
  std::vector<std::int64_t> ints;  // INT64 / INT32 / BOOL data
  std::int64_t numel() const;
  // The value of a tensor of one element, as a double (float or integer).
  bool scalar(double& value) const;
};

// Decodes t. Throws std::runtime_error "<what>: ..." for external data, an unsupported data
// type or data that does not match the dims.
OnnxTensor decode_onnx_tensor(const onnx::TensorProto& t, const std::string& what);

}  // namespace ringtrain
