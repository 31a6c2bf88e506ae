// Tensor storage: aligned allocation and shape helpers.
#include "nn/Tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {

std::size_t numel(const Dims& dims) noexcept {
  std::size_t n = 1;
  for (auto d : dims) n *= static_cast<std::size_t>(d);
  return n;
}

std::string dims_str(const Dims& dims) {
  std::string s;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s.push_back('x');
    s.append(std::to_string(dims[i]));
  }
  return s;
}

void Tensor::FreeDeleter::operator()(float* p) const noexcept { std::free(p); }

Tensor::Tensor(Dims dims) : dims_(std::move(dims)) {
  for (auto d : dims_)
    if (d < 0) throw std::invalid_argument(fmt::format("Tensor: negative dimension in {}", dims_str(dims_)));
  // aligned_alloc needs a size that is a multiple of the alignment.
  const std::size_t bytes =
      (std::max<std::size_t>(numel(), 1) * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment;
  auto* p = static_cast<float*>(std::aligned_alloc(kAlignment, bytes));
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  storage_ = std::shared_ptr<float>(p, FreeDeleter{});
  data_ = p;
}

Tensor Tensor::view(float* data, Dims dims) {
  Tensor t;
  t.dims_ = std::move(dims);
  t.data_ = data;
  return t;
}

}  // namespace ringtrain
