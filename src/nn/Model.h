// A CNN as a directed acyclic graph of oneDNN layers (Graph; the sequential models are
// chains) over one flat parameter buffer and one flat gradient buffer (64-byte aligned),
// laid out in reverse topological order, the order backward finishes the layers, so the
// gradients it finishes first form the first contiguous bucket (design.md §4, §8).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/ImageShape.h"
#include "nn/ParamInfo.h"
#include "nn/ParamsVersion.h"
#include "nn/Precision.h"
#include "nn/Tensor.h"

namespace ringtrain {

enum class Phase { kTrain, kEval };

// Sums over the batch, so ranks can add them exactly.
struct LossResult {
  double loss_sum = 0.0;     // sum of per-sample cross-entropy losses
  std::int64_t correct = 0;  // samples whose arg-max logit equals the label
  std::int64_t count = 0;    // samples in the batch
};

// Called during backward when grads()[offset, offset + count) are final.
using GradReadyFn = std::function<void(std::size_t offset, std::size_t count)>;

class Layer;
class Graph;
class GraphPlan;

class Model {
 public:
  // Builds the zoo model `name` for the input shape and class count. Throws
  // std::invalid_argument for an unknown name or a shape the model cannot take.
  Model(const std::string& name, ImageShape input, int classes);
  // A model of any layer graph (not yet finalized) ending in (N, classes) logits, named name.
  Model(const std::string& name, Graph graph, ImageShape input, int classes);
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  // Deterministic initialisation from seed (Kaiming for ReLU layers, zero biases,
  // BatchNorm gamma 1 beta 0, running mean 0 var 1).
  void init(std::uint64_t seed);

  const std::string& name() const noexcept;
  ImageShape input_shape() const noexcept;
  int classes() const noexcept;

  // Flat buffers. params/grads have num_params() floats; buffers() holds non-trained
  // state (BatchNorm running statistics), averaged across ranks before eval/checkpoints.
  // The non-const params() is the only way to write the parameters: while the ParamsSpan
  // it returns lives, every forward converts the layers' weight copies (bf16, blocked
  // layouts) afresh, and when it ends they are marked stale, so the next forward converts
  // them once more and the forwards after it convert nothing until the next write. Reading
  // through the const overload converts nothing.
  ParamsSpan params() noexcept;
  // During a write through params() that reports the ranges it has finished (Optimizer's
  // update observer): params()[offset, offset + count) are final for this write, so the parts
  // of the layers' plain bf16 weight copies they cover are narrowed now, while those floats
  // are still in cache, and a copy covered exactly once by the end of the write counts as
  // converted, so the next forward narrows nothing. Copies in other layouts (oneDNN reorders)
  // and every copy after any other write convert at the next forward as before. Nothing to do
  // in fp32.
  void params_updated(std::size_t offset, std::size_t count);
  std::span<float> grads() noexcept;
  std::span<float> buffers() noexcept;
  std::span<const float> params() const noexcept;
  std::span<const float> buffers() const noexcept;
  std::size_t num_params() const noexcept;

  // Parameter tensors in buffer order (reverse topological order).
  const std::vector<ParamInfo>& param_infos() const noexcept;

  // Layer kinds and shapes, one line per layer: what checkpoints and the cross-rank
  // configuration check compare.
  std::string signature() const;

  // What the layers compute in (default fp32). bf16: activations and the primitives'
  // weights are bf16, params(), grads() and buffers() stay fp32, the logits and the loss
  // fp32. Drops the cached plans. Throws dnnl::error where oneDNN has no bf16 at all.
  void set_precision(Precision precision);
  Precision precision() const noexcept;

  // The graph's training-valid fusions (conv + ReLU, batch norm + ReLU; on by default), for
  // comparisons and the plan report. Same parameters and signature either way. Drops the
  // cached plans.
  void set_fusions(bool on);
  // Activations and gradients whose lives do not overlap share bytes (on by default); off:
  // every buffer its own, as a baseline for the plan report and comparisons. Same results
  // either way. Drops the cached plans.
  void set_memory_planning(bool on);

  // Multiply-adds x 2 for one forward pass of one image.
  double flops_per_image() const;

  // The layers in forward (topological) order, and the activation dims (N = 1) of layer i's
  // first input. graph(): which tensors each layer reads.
  std::size_t num_layers() const noexcept;
  const Layer& layer(std::size_t i) const;
  Dims layer_input_dims(std::size_t i) const;
  const Graph& graph() const noexcept;
  // The execution plan for batches of n in this phase (built on first use, as forward does):
  // memories, reorders and their counts (GraphPlan::stats).
  const GraphPlan& plan(int n, Phase phase);

  // src: (n, C, H, W) float; labels: n ints in [0, classes). Runs the layers and the
  // softmax cross-entropy. noise_seed drives dropout (train phase only).
  LossResult forward(const float* src, const std::int32_t* labels, int n, Phase phase,
                     std::uint64_t noise_seed = 0);

  // Backward of the last train-phase forward, layers in exact reverse order: overwrites
  // grads() with the gradient of the mean loss over that batch. on_ready, if set, is called as parameter ranges finish.
  void backward(const GradReadyFn& on_ready = {});

  // Logits of the last forward: (n, classes).
  std::span<const float> logits() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct ZooEntry {
  std::string name;
  std::string description;
};

// The models Model can build, in display order.
const std::vector<ZooEntry>& model_zoo();

}  // namespace ringtrain
