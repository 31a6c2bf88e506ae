// OnnxTensor: TensorProto decoding. ONNX stores raw_data little-endian, as this machine does.
#include "onnx/OnnxTensor.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

namespace ringtrain {

std::int64_t OnnxTensor::numel() const {
  std::int64_t n = 1;
  for (const auto d : dims) n *= d;
  return n;
}

bool OnnxTensor::scalar(double& value) const {
  if (!has_data || numel() != 1) return false;
  value = is_float ? static_cast<double>(floats[0]) : static_cast<double>(ints[0]);
  return true;
}

OnnxTensor decode_onnx_tensor(const onnx::TensorProto& t, const std::string& what) {
  OnnxTensor out;
  if (t.data_location() == onnx::TensorProto::EXTERNAL || t.external_data_size() > 0)
    throw std::runtime_error(fmt::format("{}: data in an external file (not supported; export with the weights inside)", what));
  std::int64_t count = 1;
  for (const auto d : t.dims()) {
    // A bound that keeps every product below 2^31 floats: no overflow, no absurd allocation.
    if (d < 0 || d > (std::int64_t{1} << 31) || count * std::max<std::int64_t>(d, 1) > (std::int64_t{1} << 31))
      throw std::runtime_error(fmt::format("{}: dims out of range", what));
    out.dims.push_back(d);
    count *= d;
  }
  const std::string& raw = t.raw_data();
  const auto n = static_cast<std::size_t>(count);
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      if (!raw.empty()) {
        if (raw.size() != n * sizeof(float))
          throw std::runtime_error(fmt::format("{}: {} bytes of data for {} floats", what, raw.size(), n));
        out.floats.resize(n);
        std::memcpy(out.floats.data(), raw.data(), raw.size());
      } else if (t.float_data_size() > 0) {
        if (static_cast<std::size_t>(t.float_data_size()) != n)
          throw std::runtime_error(fmt::format("{}: {} floats of data for {}", what, t.float_data_size(), n));
        out.floats.assign(t.float_data().begin(), t.float_data().end());
      }
      out.has_data = !out.floats.empty() || n == 0;
      return out;
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::BOOL: {  // BOOL: Dropout's training_mode, as PyTorch writes it
      out.is_float = false;
      const std::size_t width = t.data_type() == onnx::TensorProto::INT64 ? 8 : t.data_type() == onnx::TensorProto::BOOL ? 1 : 4;
      if (!raw.empty()) {
        if (raw.size() != n * width)
          throw std::runtime_error(fmt::format("{}: {} bytes of data for {} integers", what, raw.size(), n));
        for (std::size_t i = 0; i < n; ++i) {
          std::int64_t v = 0;
          if (width == 8) {
            std::memcpy(&v, raw.data() + i * 8, 8);
          } else if (width == 1) {
            v = static_cast<unsigned char>(raw[i]);
          } else {
            std::int32_t v32 = 0;
            std::memcpy(&v32, raw.data() + i * 4, 4);
            v = v32;
          }
          out.ints.push_back(v);
        }
      } else if (width == 8) {
        out.ints.assign(t.int64_data().begin(), t.int64_data().end());
      } else {
        out.ints.assign(t.int32_data().begin(), t.int32_data().end());
      }
      if (!out.ints.empty() && out.ints.size() != n)
        throw std::runtime_error(fmt::format("{}: {} integers of data for {}", what, out.ints.size(), n));
      out.has_data = !out.ints.empty() || n == 0;
      return out;
    }
    default:
      throw std::runtime_error(fmt::format("{}: data type {} (supported: FLOAT, INT64, INT32, BOOL)", what,
                                           onnx::TensorProto::DataType_Name(
                                               static_cast<onnx::TensorProto::DataType>(t.data_type()))));
  }
}

}  // namespace ringtrain
