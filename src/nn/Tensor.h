// Tensor: a plain (row-major, e.g. NCHW / OIHW) float array that either owns 64-byte
// aligned storage or is a view into someone else's buffer (the model's flat arenas).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ringtrain {

using Dims = std::vector<std::int64_t>;

// Number of elements of a shape; 1 for a scalar (empty shape).
std::size_t numel(const Dims& dims) noexcept;
// "2x3x4", for messages and signatures.
std::string dims_str(const Dims& dims);

class Tensor {
 public:
  static constexpr std::size_t kAlignment = 64;  // bytes: one cache line, one AVX-512 vector

  Tensor() = default;
  // Owns zero-filled, 64-byte aligned storage of numel(dims) floats.
  explicit Tensor(Dims dims);
  // A view of numel(dims) floats at data; the caller keeps them alive.
  static Tensor view(float* data, Dims dims);

  float* data() noexcept { return data_; }
  const float* data() const noexcept { return data_; }
  const Dims& dims() const noexcept { return dims_; }
  std::size_t numel() const noexcept { return ringtrain::numel(dims_); }
  bool owns_storage() const noexcept { return static_cast<bool>(storage_); }
  std::span<float> span() noexcept { return {data_, numel()}; }
  std::span<const float> span() const noexcept { return {data_, numel()}; }

 private:
  struct FreeDeleter {
    void operator()(float* p) const noexcept;
  };
  Dims dims_;
  float* data_ = nullptr;
  std::shared_ptr<float> storage_;  // shared so that copies of a Tensor alias, like views
};

}  // namespace ringtrain
