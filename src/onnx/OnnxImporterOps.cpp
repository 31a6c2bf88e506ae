// OnnxImporter: the ops with weights or spatial attributes (Conv, BatchNormalization, pools,
// Gemm, MatMul). ringtrain's layers are square and symmetric: a kernel, stride, dilation or
// padding that differs between axes or sides is refused by name rather than approximated.
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <onnx/onnx_pb.h>

#include "nn/BatchNorm2d.h"
#include "nn/Conv2d.h"
#include "nn/Linear.h"
#include "nn/Pool2d.h"
#include "onnx/OnnxAttributes.h"
#include "onnx/OnnxImporter.h"

namespace ringtrain {
namespace {

// The one value of a per-axis attribute whose entries must all agree; 0 if they differ.
std::int64_t uniform(const std::vector<std::int64_t>& v) {
  if (v.empty()) return 0;
  for (const auto x : v)
    if (x != v[0]) return 0;
  return v[0];
}

// Sizes a layer takes as int: anything past 2^24 is no image network's (and would overflow).
constexpr std::int64_t kMaxSize = std::int64_t{1} << 24;

}  // namespace

void OnnxImporter::conv(const onnx::NodeProto& n) {
  only_attributes(n, {"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad"});
  const std::string& x = in(n, 0);
  const Dims& d = dims_.at(x);
  if (d.size() != 4) fail(n, fmt::format("shapes do not fit: expects a 4-D input, got [{}]", fmt::join(d, ", ")));
  const OnnxTensor& w0 = constant(n, 1);
  if (w0.dims.size() != 4 || w0.dims[2] != w0.dims[3] || w0.dims[2] < 1)
    fail(n, fmt::format("only square 2-D kernels are supported, weight dims [{}]", fmt::join(w0.dims, ", ")));
  const std::int64_t k = w0.dims[2];
  const auto kernel_shape = ints_attribute(n, "kernel_shape", {k, k});
  if (kernel_shape != std::vector<std::int64_t>{k, k}) fail(n, "kernel_shape does not match the weight");
  const std::int64_t stride = uniform(ints_attribute(n, "strides", {1, 1}));
  const std::int64_t dilation = uniform(ints_attribute(n, "dilations", {1, 1}));
  if (stride < 1 || dilation < 1) fail(n, "strides and dilations must be equal on both axes and positive");
  if (k > kMaxSize || stride > kMaxSize || dilation > kMaxSize || w0.dims[0] > kMaxSize)
    fail(n, "kernel, stride, dilation or channels out of range");
  const std::vector<std::int64_t> pads = ints_attribute(n, "pads", {0, 0, 0, 0});
  std::int64_t pad = uniform(pads);
  if (pads.size() != 4 || pad < 0 || pad > kMaxSize || (pad == 0 && pads != std::vector<std::int64_t>(4, 0)))
    fail(n, "pads must be equal on all four sides");
  const std::string auto_pad = string_attribute(n, "auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // Symmetric only when the stride is 1 and the dilated kernel is odd.
    if (stride != 1 || ((k - 1) * dilation) % 2 != 0)
      fail(n, fmt::format("auto_pad {} with stride {} and kernel {} pads unevenly (not supported; give pads)",
                          auto_pad, stride, k));
    pad = (k - 1) * dilation / 2;
  } else if (auto_pad != "NOTSET" && auto_pad != "VALID") {
    fail(n, fmt::format("auto_pad {} is not supported", auto_pad));
  }
  const std::int64_t groups = int_attribute(n, "group", 1);
  if (groups < 1 || groups > kMaxSize || w0.dims[1] * groups != d[1])
    fail(n, fmt::format("shapes do not fit: input has {} channels, weight [{}] with group {} takes {}", d[1],
                        fmt::join(w0.dims, ", "), groups, w0.dims[1] * groups));
  const bool bias = n.input_size() > 2 && !n.input(2).empty();
  const Conv2d::Options o{.in = static_cast<int>(d[1]), .out = static_cast<int>(w0.dims[0]), .kernel = static_cast<int>(k),
                          .stride = static_cast<int>(stride), .pad = static_cast<int>(pad),
                          .dilation = static_cast<int>(dilation), .groups = static_cast<int>(groups), .bias = bias};
  const std::string name = layer_name(n);
  param(name, "weight", weight(n, 1, w0.dims));
  if (bias) param(name, "bias", weight(n, 2, {w0.dims[0]}));
  push(n, std::make_unique<Conv2d>(name, o), {x});
}

void OnnxImporter::batchnorm(const onnx::NodeProto& n) {
  only_attributes(n, {"epsilon", "momentum", "training_mode", "spatial"});
  const std::string& x = in(n, 0);
  const Dims& d = dims_.at(x);
  if (d.size() != 4) fail(n, fmt::format("shapes do not fit: expects a 4-D input, got [{}]", fmt::join(d, ", ")));
  if (int_attribute(n, "spatial", 1) != 1) fail(n, "spatial 0 is not supported");
  const Dims c{d[1]};
  const std::string name = layer_name(n);
  param(name, "weight", weight(n, 1, c));
  param(name, "bias", weight(n, 2, c));
  const OnnxTensor& mean = weight(n, 3, c);
  const OnnxTensor& var = weight(n, 4, c);
  if (mean.has_data && var.has_data) {
    auto& running = net_.buffers[name];
    running = mean.floats;
    running.insert(running.end(), var.floats.begin(), var.floats.end());
  }
  // ONNX's momentum keeps that much of the old statistics; PyTorch's (and ringtrain's) takes
  // that much of the new batch.
  // Rounded to float's 6 significant digits, so PyTorch's 0.1 (written as 0.9f) reads back as 0.1f.
  const float momentum = std::stof(fmt::format("{:.6g}", 1.0 - static_cast<double>(float_attribute(n, "momentum", 0.9f))));
  const float eps = float_attribute(n, "epsilon", 1e-5f);
  if (!(eps > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f)) fail(n, "epsilon must be > 0 and momentum in [0, 1]");
  net_.has_batchnorm = true;
  push(n, std::make_unique<BatchNorm2d>(name, static_cast<int>(d[1]), eps, momentum), {x});
}

void OnnxImporter::pool(const onnx::NodeProto& n, bool max) {
  only_attributes(n, {"kernel_shape", "strides", "pads", "ceil_mode", "dilations", "auto_pad", "count_include_pad",
                      "storage_order"});
  const std::string& x = in(n, 0);
  const std::vector<std::int64_t> kernel = ints_attribute(n, "kernel_shape", {});
  const std::vector<std::int64_t> pads = ints_attribute(n, "pads", {0, 0, 0, 0});
  const std::int64_t k = uniform(kernel), stride = uniform(ints_attribute(n, "strides", {1, 1})), pad = uniform(pads);
  if (kernel.size() != 2 || k < 1) fail(n, "kernel_shape must be square and positive");
  if (stride < 1) fail(n, "strides must be equal on both axes");
  if (k > kMaxSize || stride > kMaxSize || pad > kMaxSize) fail(n, "kernel, stride or pads out of range");
  if (pads.size() != 4 || pad < 0 || (pad == 0 && pads != std::vector<std::int64_t>(4, 0)))
    fail(n, "pads must be equal on all four sides");
  if (int_attribute(n, "ceil_mode", 0) != 0) fail(n, "ceil_mode 1 is not supported");
  if (uniform(ints_attribute(n, "dilations", {1, 1})) != 1) fail(n, "dilations other than 1 are not supported");
  if (int_attribute(n, "storage_order", 0) != 0) fail(n, "storage_order 1 is not supported");
  const std::string auto_pad = string_attribute(n, "auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") fail(n, fmt::format("auto_pad {} is not supported", auto_pad));
  if (!max && pad > 0 && int_attribute(n, "count_include_pad", 0) == 0)
    fail(n, "count_include_pad 0 with padding is not supported (the average counts the padded zeros)");
  push(n,
       std::make_unique<Pool2d>(layer_name(n), max ? Pool2d::Mode::kMax : Pool2d::Mode::kAvg, static_cast<int>(k),
                                static_cast<int>(stride), static_cast<int>(pad)),
       {x});
}

void OnnxImporter::linear(const onnx::NodeProto& n, const OnnxTensor& w, bool transposed, const OnnxTensor* bias,
                          const onnx::NodeProto* alias) {
  const std::string& x = in(n, 0);
  const Dims& d = dims_.at(x);
  if (d.size() != 2)
    fail(n, fmt::format("shapes do not fit: expects a 2-D input (Flatten first), got [{}]", fmt::join(d, ", ")));
  const std::int64_t out = transposed ? w.dims[1] : w.dims[0], features = transposed ? w.dims[0] : w.dims[1];
  if (features != d[1])
    fail(n, fmt::format("shapes do not fit: input has {} features, weight [{}] takes {}", d[1], fmt::join(w.dims, ", "),
                        features));
  if (out < 1 || out > kMaxSize) fail(n, fmt::format("{} outputs out of range", out));
  const std::string name = layer_name(n);
  if (w.has_data) {
    // ringtrain keeps (out, in), as Gemm with transB = 1 and PyTorch's Linear.
    std::vector<float>& dst = net_.params[name + ".weight"];
    if (!transposed) {
      dst = w.floats;
    } else {
      dst.resize(w.floats.size());
      for (std::int64_t i = 0; i < features; ++i)
        for (std::int64_t o = 0; o < out; ++o) dst[static_cast<std::size_t>(o * features + i)] = w.floats[static_cast<std::size_t>(i * out + o)];
    }
  }
  if (bias != nullptr) param(name, "bias", *bias);
  push(n, std::make_unique<Linear>(name, static_cast<int>(features), static_cast<int>(out), bias != nullptr), {x},
       alias);
}

void OnnxImporter::gemm(const onnx::NodeProto& n) {
  only_attributes(n, {"alpha", "beta", "transA", "transB"});
  if (int_attribute(n, "transA", 0) != 0) fail(n, "transA 1 is not supported");
  if (float_attribute(n, "alpha", 1.0f) != 1.0f || float_attribute(n, "beta", 1.0f) != 1.0f)
    fail(n, "only alpha 1 and beta 1 are supported");
  const OnnxTensor& w0 = constant(n, 1);
  if (w0.dims.size() != 2) fail(n, fmt::format("weight must be 2-D, got [{}]", fmt::join(w0.dims, ", ")));
  const bool trans_b = int_attribute(n, "transB", 0) != 0;
  const OnnxTensor& w = weight(n, 1, w0.dims);
  const std::int64_t out = trans_b ? w.dims[0] : w.dims[1];
  const OnnxTensor* bias = nullptr;
  if (n.input_size() > 2 && !n.input(2).empty()) bias = &weight(n, 2, {out});
  linear(n, w, !trans_b, bias, nullptr);
}

void OnnxImporter::matmul(const onnx::NodeProto& n) {
  only_attributes(n, {});
  const OnnxTensor& w0 = constant(n, 1);
  if (w0.dims.size() != 2) fail(n, fmt::format("weight must be a 2-D initializer, got [{}]", fmt::join(w0.dims, ", ")));
  const OnnxTensor& w = weight(n, 1, w0.dims);
  // MatMul then Add of a (out) constant: PyTorch's Linear on inputs it did not write as Gemm.
  const onnx::NodeProto* add = sole_reader(n);
  const OnnxTensor* bias = nullptr;
  if (add != nullptr && add->op_type() == "Add" && add->domain().empty() && add->input_size() == 2) {
    const int other = add->input(0) == n.output(0) ? 1 : 0;
    const auto it = constants_.find(add->input(other));
    if (it != constants_.end() && it->second.is_float && it->second.dims == Dims{w.dims[1]} &&
        (it->second.has_data || !need_weights_)) {
      bias = &it->second;
      fused_.insert(add);
    }
  }
  linear(n, w, true, bias, bias != nullptr ? add : nullptr);
}

}  // namespace ringtrain
