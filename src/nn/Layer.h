// Layer: one step of a Model, running oneDNN primitives that are built once per input
// memory layout (batch shape) and phase, then cached.
//
// Activations travel between layers as dnnl::memory objects whose layout the producing
// primitive chose (blocked, e.g. nChw16c, between convolutions); the Model reorders only
// where a consumer wants another layout. Parameters are plain views (offset, shape)
// into the model's flat arenas.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "nn/Model.h"
#include "nn/ParamInfo.h"
#include "nn/ParamsVersion.h"
#include "nn/Tensor.h"
#include "nn/WeightCopy.h"

namespace ringtrain {

// What of a following ReLU a layer can do itself: nothing, the forward (the ReLU layer still
// masks the gradient by its dst), or both passes.
enum class ReluFusion { kNone, kForward, kBoth };

// One parameter tensor a layer needs, in the layer's own order.
struct ParamSpec {
  std::string suffix;  // "weight", "bias"
  Dims dims;           // plain layout: conv (O, I / groups, KH, KW), linear (O, I), vectors (C)
  ParamKind kind = ParamKind::kWeight;
  std::int64_t fan_in = 0;  // for initialisation; 0 for vectors
};

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer();
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const noexcept { return name_; }
  // Short kind ("conv2d") and kind plus hyper-parameters, for signatures.
  virtual std::string kind() const = 0;
  virtual std::string describe() const = 0;

  // Output dims for input dims (N first). Throws std::invalid_argument if impossible.
  virtual Dims out_shape(const Dims& in) const = 0;
  // Multiply-adds x 2 for one sample of input dims in (N ignored).
  virtual double flops_per_image(const Dims& in) const;

  virtual std::vector<ParamSpec> param_specs() const { return {}; }
  // Non-trained state (floats) the layer keeps in the model's buffer arena.
  virtual std::size_t num_buffers() const { return 0; }
  // Views into the arenas, in param_specs() order. Must precede prepare(). params_version:
  // the owner's (Model's), so weight copies (bf16, blocked layouts) are converted once per
  // parameter change; without one, every forward converts them again.
  void bind_params(std::vector<Tensor> params, std::vector<Tensor> grads,
                   const ParamsVersion* params_version = nullptr);
  void bind_buffers(float* buffers) { buffers_ = buffers; }
  const std::vector<Tensor>& params() const noexcept { return params_; }
  const std::vector<Tensor>& grads() const noexcept { return grads_; }
  // The layer's part of the model's buffer arena (num_buffers() floats; null if unbound).
  const float* buffer_data() const noexcept { return buffers_; }
  // Initial values of the non-trained state (BatchNorm: mean 0, var 1).
  virtual void reset_buffers() {}
  // Model::params_updated's part: arena floats [begin, end) are final for the write under way;
  // narrows what falls in each plain bf16 weight copy now (WeightCopy::narrow_part).
  void params_updated(const float* begin, const float* end);
  // Conversions of the parameters into the primitives' weight copies so far (0 when every
  // primitive reads the arena as it is): one per parameter change and copy.
  virtual std::uint64_t weight_conversions() const noexcept;

  // The data type of activations (and of weights inside the primitives): f32 (default) or
  // bf16. Parameters and their gradients stay f32 in the arenas whatever it is. Drops the
  // prepared states.
  void set_compute_type(dnnl::memory::data_type type);
  dnnl::memory::data_type compute_type() const noexcept { return compute_type_; }

  // dst aliases src (the Model may pass the same buffer for both; the layer also works
  // out of place). needs_dst_in_backward: the layer reads its dst during backward, so the
  // next layer must not overwrite it in place.
  virtual bool in_place() const { return false; }
  virtual bool needs_dst_in_backward() const { return false; }
  // The layer reads its src during backward (the plan keeps it alive until then). Layers that
  // do not (they mask by dst, keep a workspace, or need only diff_dst) say so.
  virtual bool needs_src_in_backward() const { return true; }

  // Training-valid fusion of a ReLU that alone reads this layer's dst (Graph decides): the
  // layer writes max(y, 0) itself (convolution: an eltwise post-op, kForward; batch norm:
  // fuse_norm_relu, whose workspace also masks its backward, kBoth). Setting it drops the
  // prepared states.
  virtual ReluFusion relu_fusion() const { return ReluFusion::kNone; }
  void set_relu_post_op(bool on);
  bool relu_post_op() const noexcept { return relu_post_op_; }
  // Reorders one training step of the prepared state runs inside the layer: activation
  // layouts its primitives disagree on, weight copies converted by a reorder (the parameters
  // change every step) and gradients reordered back into the arena. Same-layout copies count
  // as copies, not reorders.
  struct StepReorders {
    int activations = 0;
    int weights = 0;
    int copies = 0;
  };
  virtual StepReorders step_reorders() const { return {}; }
  // Bytes of the prepared state's own memories that live across a step (workspaces,
  // reordered activations kept for backward, scratch), for the plan report.
  virtual std::size_t state_bytes() const { return 0; }

  // Selects (building on first use) the primitives for inputs of layout src_md in this
  // phase. need_diff_src false skips the backward-data pass (first layer of a model).
  // Inputs of another data type than compute_type() are wanted in compute_type() (the
  // layer's src_md() says so; the caller reorders).
  void prepare(const dnnl::memory::desc& src_md, Phase phase, bool need_diff_src);
  // Layouts of the prepared state: what forward wants and produces, what backward wants
  // and produces. Valid after prepare().
  const dnnl::memory::desc& src_md() const { return state().src_md; }
  const dnnl::memory::desc& dst_md() const { return state().dst_md; }
  const dnnl::memory::desc& diff_dst_md() const { return state().diff_dst_md; }
  const dnnl::memory::desc& diff_src_md() const { return state().diff_src_md; }

  // Enqueues the forward on the context's stream. src/dst in src_md()/dst_md(); seed
  // drives randomness (dropout) in the train phase.
  void forward(const dnnl::memory& src, const dnnl::memory& dst, Phase phase, std::uint64_t seed = 0);
  // Backward of the last forward (train phase). Overwrites the parameter gradients;
  // diff_src may be an empty memory when prepared with need_diff_src false.
  void backward(const dnnl::memory& diff_dst, const dnnl::memory& diff_src);

  // The same steps for a node of a layer graph with any number of inputs. A single-input
  // layer takes one and runs the calls above; multi-input layers (MultiInputLayer: Add,
  // Concat) override them. diff_srcs[k] may be empty for an input that needs no gradient.
  virtual std::size_t num_inputs() const { return 1; }
  // Every input's gradient is the same tensor (Add): backward need write only the first one
  // asked for; the plan may leave the other slots empty and read that one in their place.
  virtual bool shares_input_gradients() const { return false; }
  // Every input's gradient is diff_dst itself (Add without ReLU): one slot may be diff_dst.
  virtual bool passes_gradient_through() const { return false; }
  virtual Dims out_shape_of(const std::vector<Dims>& in) const;
  virtual void prepare_inputs(const std::vector<dnnl::memory::desc>& src_mds, Phase phase, bool need_diff_src);
  virtual const dnnl::memory::desc& input_md(std::size_t k) const;
  virtual const dnnl::memory::desc& diff_input_md(std::size_t k) const;
  virtual void forward_inputs(const std::vector<dnnl::memory>& srcs, const dnnl::memory& dst, Phase phase,
                              std::uint64_t seed = 0);
  virtual void backward_inputs(const dnnl::memory& diff_dst, const std::vector<dnnl::memory>& diff_srcs);

 protected:
  struct State {
    virtual ~State() = default;
    dnnl::memory::desc key;  // the src_md prepare() was called with
    Phase phase = Phase::kTrain;
    bool need_diff_src = true;
    dnnl::memory::desc src_md, dst_md, diff_dst_md, diff_src_md;
    dnnl::memory src, dst;  // of the last forward, for backward
  };
  virtual std::unique_ptr<State> build(const dnnl::memory::desc& src_md, Phase phase, bool need_diff_src) = 0;
  virtual void run_forward(State& s, const dnnl::memory& src, const dnnl::memory& dst, std::uint64_t seed) = 0;
  virtual void run_backward(State& s, const dnnl::memory& diff_dst, const dnnl::memory& diff_src) = 0;

  State& state() const;
  static dnnl::engine& engine();
  static dnnl::stream& stream();
  // params_[i] as a primitive wants it (layout, data type): the arena itself when that is
  // it, else a copy that every state of this layer wanting the same layout shares. Wanted
  // dims other than the parameter's, with as many elements, view the arena row-major in
  // them (grouped convolution weights, 5-D for oneDNN). from: a
  // copy of the same parameter in another layout (the forward's, for backward-data), which a
  // new copy of its data type is reordered from instead of the fp32 arena when from is bf16
  // or a reordered (blocked) fp32 copy.
  std::shared_ptr<WeightCopy> weight_copy(std::size_t i, const dnnl::memory::desc& wanted,
                                          const std::shared_ptr<WeightCopy>& from = nullptr);
  // w with the current parameters (converted only if they changed since its last conversion).
  void refresh(WeightCopy& w) const;
  // What refresh() compares a copy's conversion against, for copies a layer keeps itself.
  const ParamsVersion& params_version() const noexcept { return version_source_ ? *version_source_ : own_version_; }

  std::vector<Tensor> params_, grads_;
  float* buffers_ = nullptr;
  // Prepared states (one per input layouts and phase) and the selected one; a multi-input
  // layer keeps its own here too, so set_compute_type and bind_params drop them alike.
  std::vector<std::unique_ptr<State>> states_;
  State* current_ = nullptr;

 private:
  std::string name_;
  dnnl::memory::data_type compute_type_ = dnnl::memory::data_type::f32;
  bool relu_post_op_ = false;
  const ParamsVersion* version_source_ = nullptr;
  ParamsVersion own_version_;  // without a version source: changes at every forward
  std::vector<std::pair<std::size_t, std::shared_ptr<WeightCopy>>> weight_copies_;  // (param index, copy)
};

// Helpers shared by the layer implementations.
// Row-major (nchw / nc / oihw / x), f32 unless told.
dnnl::memory::desc plain_md(const Dims& dims, dnnl::memory::data_type type = dnnl::memory::data_type::f32);
bool is_plain(const dnnl::memory::desc& md);  // plain_md of its dims and data type
Dims md_dims(const dnnl::memory::desc& md);
// md with its data type replaced, same dims and layout (strides count elements, not bytes).
dnnl::memory::desc with_type(const dnnl::memory::desc& md, dnnl::memory::data_type type);

// A plain user buffer seen through a (possibly blocked) layout a primitive wants: the
// reorder is built once and run on demand; when the layouts agree, no copy is made.
class ReorderedMemory {
 public:
  ReorderedMemory() = default;
  ReorderedMemory(const dnnl::memory& user, const dnnl::memory::desc& wanted);
  // Memory in the wanted layout.
  const dnnl::memory& get() const noexcept { return internal_; }
  bool needs_reorder() const noexcept { return static_cast<bool>(to_internal_); }
  // user -> internal (before reading); internal -> user (after a primitive wrote it).
  void pull();
  void push();

 private:
  dnnl::memory user_, internal_;
  dnnl::reorder to_internal_, to_user_;
};

}  // namespace ringtrain
