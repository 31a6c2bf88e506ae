// A trained model as an ONNX file: the checkpoint's network, its fp32 weights as
// initializers, for inference elsewhere (onnxruntime, PyTorch's onnx2torch, ...).
#pragma once

#include <filesystem>

namespace ringtrain {

class Model;

// The ONNX opset the exported graphs use (Conv, Gemm, Relu, MaxPool, AveragePool,
// BatchNormalization, LRN, Flatten, Identity for dropout).
inline constexpr int kOnnxOpset = 13;

// Writes model (in eval form: dropout as Identity, batch norm on its running statistics) as
// ONNX to out, through a temporary file renamed over out, so a failure leaves no partial
// file. Input "input" (N, C, H, W) float, normalised as in training; output "logits"
// (N, classes), before softmax. Throws std::runtime_error naming out on failure.
void write_onnx(const Model& model, const std::filesystem::path& out);

}  // namespace ringtrain
