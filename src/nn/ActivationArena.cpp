// ActivationArena: liveness intervals and first-fit placement, largest buffer first.
#include "nn/ActivationArena.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "nn/DnnlContext.h"

namespace ringtrain {

using dnnl::memory;

namespace {
// oneDNN's own allocations are 64-byte aligned; so is every buffer here.
constexpr std::size_t kAlign = 64;
std::size_t aligned(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

memory ActivationArena::create(const memory::desc& md) {
  memory m(md, DnnlContext::get().engine(), DNNL_MEMORY_NONE);
  ids_[m.get()] = static_cast<int>(buffers_.size());
  buffers_.push_back({aligned(md.get_size()), INT_MAX, -1, 0, {m}});
  return m;
}

memory ActivationArena::alias(const memory::desc& md, const memory& of) {
  const int id = id_of(of);
  if (id < 0) return memory(md, DnnlContext::get().engine(), of.get_data_handle());
  if (aligned(md.get_size()) > buffers_[static_cast<std::size_t>(id)].bytes)
    throw std::logic_error("ActivationArena: an in-place view larger than its buffer");
  memory m(md, DnnlContext::get().engine(), DNNL_MEMORY_NONE);
  ids_[m.get()] = id;
  buffers_[static_cast<std::size_t>(id)].views.push_back(m);
  return m;
}

int ActivationArena::id_of(const memory& m) const {
  if (!m) return -1;
  const auto it = ids_.find(m.get());
  return it == ids_.end() ? -1 : it->second;
}

void ActivationArena::use(const memory& m, int step) {
  const int id = id_of(m);
  if (id < 0) return;
  Buffer& b = buffers_[static_cast<std::size_t>(id)];
  b.first = std::min(b.first, step);
  b.last = std::max(b.last, step);
}

void ActivationArena::pin(const memory& m) {
  use(m, INT_MIN);
  use(m, INT_MAX);
}

void ActivationArena::place(bool shared) {
  for (Buffer& b : buffers_)
    if (b.last < b.first) b.first = INT_MIN, b.last = INT_MAX;  // never used: kept whole, to be safe
  std::vector<std::size_t> order(buffers_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return buffers_[a].bytes > buffers_[b].bytes; });
  std::vector<std::size_t> placed;
  bytes_ = 0;
  for (const std::size_t i : order) {
    Buffer& b = buffers_[i];
    b.offset = shared ? 0 : bytes_;
    if (shared) {
      // Live neighbours by offset; slide past each one that overlaps the candidate range.
      std::vector<const Buffer*> live;
      for (const std::size_t j : placed)
        if (buffers_[j].first <= b.last && b.first <= buffers_[j].last) live.push_back(&buffers_[j]);
      std::sort(live.begin(), live.end(), [](auto x, auto y) { return x->offset < y->offset; });
      for (const Buffer* o : live)
        if (o->offset < b.offset + b.bytes && b.offset < o->offset + o->bytes) b.offset = o->offset + o->bytes;
    }
    bytes_ = std::max(bytes_, b.offset + b.bytes);
    placed.push_back(i);
  }
  data_.reset(bytes_ > 0 ? std::aligned_alloc(kAlign, bytes_) : nullptr);
  if (bytes_ > 0 && !data_) throw std::bad_alloc();
  // All ones: NaN in f32 and bf16. A read before the first write (a life planned too short)
  // then shows as NaN in the results instead of depending on what the heap held.
  if (bytes_ > 0) std::memset(data_.get(), 0xff, bytes_);
  for (Buffer& b : buffers_)
    for (memory& m : b.views) m.set_data_handle(static_cast<char*>(data_.get()) + b.offset);
}

std::size_t ActivationArena::separate_bytes() const {
  std::size_t n = 0;
  for (const Buffer& b : buffers_) n += b.bytes;
  return n;
}

}  // namespace ringtrain
