// A trained model as an ONNX file: the checkpoint's network, its fp32 weights as
// initializers, for inference elsewhere (onnxruntime, PyTorch's onnx2torch, ...).
#pragma once

#include <filesystem>
#include <string>

namespace ringtrain {

class Model;

// The ONNX opset the exported graphs use (Conv, Gemm, Relu, MaxPool, AveragePool,
// BatchNormalization, LRN, Flatten, Dropout with its ratio input, Add, Sum, Concat, Clip).
inline constexpr int kOnnxOpset = 13;

// model as the bytes of an ONNX file; with_weights false: its parameters and running
// statistics as dims only (the graph a checkpoint carries).
std::string onnx_bytes(const Model& model, bool with_weights);

// Writes model (dropout as Dropout, an identity at inference; batch norm on its running statistics) as
// ONNX to out, through a temporary file renamed over out, so a failure leaves no partial
// file. Input "input" (N, C, H, W) float, normalised as in training; output "logits"
// (N, classes), before softmax. Throws std::runtime_error naming out on failure.
void write_onnx(const Model& model, const std::filesystem::path& out);

}  // namespace ringtrain
