// ActivationArena: the activation and gradient buffers of one GraphPlan in one allocation,
// placed by liveness (MXNet's memory planner, Chen et al. 2015's "static memory allocation"):
// a step of the plan is a node's forward (i) or backward (2L - 1 - i); a buffer lives from its
// first to its last use, and buffers whose lives do not overlap may share bytes.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

namespace ringtrain {

class ActivationArena {
 public:
  // A memory of layout md over a new buffer; its handle is set by place().
  dnnl::memory create(const dnnl::memory::desc& md);
  // A memory of layout md over the buffer of `of` (in place; md no larger). `of` outside the
  // arena: over of's own handle.
  dnnl::memory alias(const dnnl::memory::desc& md, const dnnl::memory& of);
  // The buffer under m is read or written at this step; nothing for a memory outside the arena.
  void use(const dnnl::memory& m, int step);
  // The buffer under m lives as long as the plan (read by the caller between steps).
  void pin(const dnnl::memory& m);

  // Gives every buffer its bytes and sets the handles: with shared, buffers whose lives do not
  // overlap may share bytes (each placed, largest first, at the lowest offset that overlaps no
  // placed buffer living at the same time); without, one after another.
  void place(bool shared);
  // Bytes the buffers need on their own, and the arena's bytes.
  std::size_t separate_bytes() const;
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  struct Buffer {
    std::size_t bytes = 0;
    int first = INT_MAX, last = -1;  // steps; unused: lives throughout
    std::size_t offset = 0;
    std::vector<dnnl::memory> views;
  };
  struct Free {
    void operator()(void* p) const noexcept { std::free(p); }
  };
  int id_of(const dnnl::memory& m) const;
  std::vector<Buffer> buffers_;
  std::map<dnnl_memory_t, int> ids_;
  std::unique_ptr<void, Free> data_;
  std::size_t bytes_ = 0;
};

}  // namespace ringtrain
