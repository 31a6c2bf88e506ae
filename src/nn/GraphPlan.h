// GraphPlan: the memories and reorders that run a Graph for one (batch size, phase): one
// activation per tensor (a single-reader in-place layer writes over its input), a private
// copy wherever a reader wants another layout, and in training one gradient per tensor that
// needs one. Backward runs the nodes in exact reverse order; of a tensor's readers the first
// to run backward (the last in forward order) overwrites its gradient and the others add into
// it (oneDNN's backward-data overwrites diff_src), in that fixed order, so results are the
// same on every rank and every run. An add's gradients are not copied where they need not be:
// without ReLU one input's is its diff_dst itself, and a shortcut's first sum reads the add's
// gradient where it lies (the same floats in the same order as from a copy).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "nn/ActivationArena.h"
#include "nn/Graph.h"

namespace ringtrain {

// What a plan runs per step besides the layers' primitives, and the memory it holds.
struct PlanStats {
  int forward_reorders = 0;   // activations between layers, layout or data type changed
  int backward_reorders = 0;  // gradients between layers, likewise (plus the logits' reorder)
  int copies = 0;             // same-layout copies: the input into the first reader, the layers' own
  int gradient_sums = 0;      // a tensor read several times receives their sum
  int shared_gradients = 0;   // of them, sums that read a gradient another slot shares (no copy made)
  int passed_gradients = 0;   // input gradients that are their layer's diff_dst (an add without ReLU: no copy)
  int layer_reorders = 0;     // inside the layers: activation layouts their primitives disagree on
  int weight_reorders = 0;    // weight copies converted by a reorder, gradients reordered to the arena
  // Activations and gradients (forward values, private input copies, diff values, diff_dst
  // copies, slots summed in): each in a buffer of its own, and in the liveness-planned arena.
  std::size_t separate_bytes = 0;
  std::size_t planned_bytes = 0;
  std::size_t layer_bytes = 0;  // the layers' own memories (workspaces, reordered copies)
};

class GraphPlan {
 public:
  // Prepares every layer of graph (finalized) for batches of n in this phase. share_memory:
  // activations and gradients whose lives do not overlap share bytes (ActivationArena).
  GraphPlan(const Graph& graph, int n, Phase phase, bool share_memory = true);

  int n() const noexcept { return n_; }
  Phase phase() const noexcept { return phase_; }

  // Enqueues the forward of src (n, C, H, W), plain f32, only ever read; noise_seed drives
  // dropout (node i's seed derives from it and i). The caller waits on the stream.
  void forward(const float* src, std::uint64_t noise_seed);
  // Plain (n, classes) f32, valid after the forward has completed.
  const float* logits() const { return static_cast<const float*>(logits_.get_data_handle()); }
  // Plain (n, classes) f32 for the loss to write before backward (train phase).
  float* diff_logits() const { return static_cast<float*>(diff_logits_.get_data_handle()); }

  // Backward of the last forward, diff_logits() filled. ranges[i]: node i's parameters in
  // the arena (offset, count); on_ready, if set, is called with each nonempty one as soon as
  // node i's backward has completed.
  void backward(const std::vector<std::pair<std::size_t, std::size_t>>& ranges, const GradReadyFn& on_ready);

  // Counted from the built plan (every reorder it made runs once per step).
  PlanStats stats() const;
  // Node i's output as its producer wrote it.
  dnnl::memory::desc value_md(int value) const { return value_.at(static_cast<std::size_t>(value)).get_desc(); }
  // The reorders and copies into node i's inputs (forward) and its diff_dst (backward).
  int input_reorders(std::size_t i) const;
  int diff_reorders(std::size_t i) const;

 private:
  void build_forward();
  void build_backward();
  // Node i's input layouts as its producers wrote them (what prepare_inputs is keyed on).
  std::vector<dnnl::memory::desc> input_mds(std::size_t i) const;
  void add_gradient_slot(std::size_t i, std::size_t k);
  // After node i's slots: leaves empty the slots of a layer that shares_input_gradients()
  // whose gradient can be read from its first slot's until the next reader adds into it.
  void share_gradient_slots(std::size_t i);
  // Node i's slot k can be its diff_dst itself (Layer::passes_gradient_through), no copy.
  bool passes_through(std::size_t i, std::size_t k) const;
  // The arena step of node i's backward (its forward's is i).
  int backward_step(std::size_t i) const;

  const Graph& graph_;
  int n_;
  Phase phase_;
  ActivationArena arena_;  // declared first: destroyed after the memories that view it
  dnnl::memory input_;                            // the caller's buffer, handle set per forward
  std::vector<dnnl::memory> value_;               // [value] as its producer wrote it
  std::vector<std::vector<dnnl::memory>> cons_;   // [node][slot] what the node reads
  std::vector<std::vector<dnnl::reorder>> copy_;  // [node][slot] value -> cons (empty: none)
  dnnl::memory logits_, diff_logits_;
  dnnl::reorder logits_copy_;
  std::vector<dnnl::memory> dvalue_;                // [value] its gradient (empty: none needed)
  std::vector<dnnl::memory> dcons_;                 // [node] its diff_dst
  std::vector<dnnl::reorder> dcopy_;                // [node] dvalue -> dcons (empty: none)
  std::vector<std::vector<dnnl::memory>> dsrc_;     // [node][slot] where it writes diff_src
  // dvalue += dsrc: a binary add when both share a layout, else a sum (empty: overwrite).
  struct Accumulation {
    dnnl::primitive add;
    bool binary = false;
    dnnl::memory first;  // what dvalue holds before the add (empty: dvalue itself)
    explicit operator bool() const noexcept { return static_cast<bool>(add); }
  };
  std::vector<std::vector<Accumulation>> accumulate_;  // [node][slot]
  // [value] the gradient written so far lives in this other memory, not yet in dvalue (a
  // shared gradient slot left empty); the next add reads it from there. Building only.
  std::vector<dnnl::memory> pending_;
  std::vector<int> passed_;  // [node] the slot whose gradient is its diff_dst (-1: none)
};

}  // namespace ringtrain
