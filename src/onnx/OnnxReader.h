// OnnxReader: a network from an ONNX file (as torch.onnx.export of PyTorch 1.13 writes it in
// training or preserve mode, opset 13-17, or as ringtrain export writes it) as a layer graph
// with its initializers as weights and its batch norms' running statistics.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/ImageShape.h"
#include "nn/Graph.h"

namespace ringtrain {

struct OnnxNetwork {
  std::string name;  // read_onnx: the file's stem; parse_onnx: the graph's name
  Graph graph;       // not yet finalized (Model does that)
  ImageShape input;  // the graph input's (C, H, W); its batch dimension is free
  int classes = 0;   // the output's second dimension
  // Values in ringtrain's layouts, keyed as Model::param_infos names them ("<layer>.<suffix>");
  // empty when the file carries the graph alone (a checkpoint's copy).
  std::map<std::string, std::vector<float>> params;
  // Each batch norm's running mean then variance, keyed by layer name.
  std::map<std::string, std::vector<float>> buffers;
  bool has_batchnorm = false;
};

// Largest file the reader takes: protobuf's own message limit (2 GiB - 1).
inline constexpr std::uintmax_t kMaxOnnxBytes = 0x7fffffff;

// The ONNX ops the reader maps onto layers, as one comma-separated line for error messages.
const std::string& supported_onnx_ops();

// Reads file. Throws std::runtime_error, one line naming the file (and the node and its op
// where one is at fault), for a file that cannot be read, is not ONNX, is too large, has a
// cycle, an unsupported op or attribute, a missing initializer, shapes that do not fit or
// several outputs.
OnnxNetwork read_onnx(const std::filesystem::path& file);

// The same from the bytes of a file; source names it in errors. need_weights false: the
// parameters' and running statistics' initializers may carry dims only (a checkpoint's graph).
OnnxNetwork parse_onnx(const std::string& bytes, const std::string& source, bool need_weights = true);

}  // namespace ringtrain
