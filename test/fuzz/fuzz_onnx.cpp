// libFuzzer harness: ONNX bytes through the reader, as a --model-file (weights required) and
// as a checkpoint's graph (dims only), down to the layer graph and its weights.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "onnx/OnnxReader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  for (const bool need_weights : {true, false}) {
    try {
      const ringtrain::OnnxNetwork net = ringtrain::parse_onnx(bytes, "fuzz.onnx", need_weights);
      (void)net.graph.size();
    } catch (const std::exception&) {
    }
  }
  return 0;
}
