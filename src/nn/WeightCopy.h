// WeightCopy: a layer's fp32 weights, kept plain in the parameter arena, as a primitive reads
// them (its layout, its data type), converted again only when the parameters have changed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <oneapi/dnnl/dnnl.hpp>

#include "nn/ParamsVersion.h"

namespace ringtrain {

class WeightCopy {
 public:
  // user: the arena's plain f32 tensor; wanted: the weights desc a primitive asked for. When
  // they agree the "copy" is the arena itself and nothing is ever converted. Plain bf16 is
  // narrowed by narrow_to_bf16; any other layout by a oneDNN reorder.
  WeightCopy(const dnnl::memory& user, const dnnl::memory::desc& wanted);
  // The same weights in another layout, reordered from source's copy rather than from the
  // arena: for a bf16 source, half the bytes to read, and the same bits (the narrowing rounds
  // each value on its own, so narrowing then permuting equals permuting while narrowing).
  WeightCopy(std::shared_ptr<WeightCopy> source, const dnnl::memory::desc& wanted);

  const dnnl::memory& get() const noexcept { return copy_; }
  // Converts the arena into the copy unless the parameters are unchanged since the copy's
  // last conversion.
  void refresh(const ParamsVersion& version);

  // For a copy that narrows(), while one write of the parameters is under way (exactly one
  // ParamsSpan alive): narrows floats [begin, begin + count) of the tensor now, while a caller
  // that has just written them (the optimizer's update observer) still has them in cache. The
  // caller promises those floats are final for this write. Once the ranges narrowed under one
  // write cover the tensor exactly, the copy counts as converted at the version that write's end
  // makes, so refresh() then converts nothing; anything else (a partial cover, another writer,
  // another write) leaves refresh() to narrow the whole tensor as before. Same bits as
  // narrow_to_bf16.
  void narrow_part(std::size_t begin, std::size_t count, const ParamsVersion& version);

  // Conversions run so far (always 0 when the copy is the arena), this copy's own.
  std::uint64_t conversions() const noexcept { return conversions_; }
  // The conversion is narrow_to_bf16 (plain f32 -> plain bf16), not a oneDNN reorder.
  bool narrows() const noexcept { return narrows_; }
  // The conversion is a oneDNN reorder (another layout, or from another copy).
  bool reorders() const noexcept { return static_cast<bool>(reorder_); }
  // The copy this one is reordered from (null: from the arena).
  const WeightCopy* source() const noexcept { return source_.get(); }

 private:
  std::shared_ptr<WeightCopy> source_;  // refreshed first; user_ is its copy
  dnnl::memory user_, copy_;
  dnnl::reorder reorder_;  // empty when the copy is the arena or narrowed
  bool aliases_ = false, narrows_ = false;
  bool valid_ = false;  // copy_ holds the arena at version_
  std::uint64_t version_ = 0;
  std::uint64_t conversions_ = 0;
  // narrow_part: floats narrowed during the write that had version value fused_at_.
  std::uint64_t fused_at_ = 0;
  std::size_t fused_ = 0;
};

// dst[i] = src[i] rounded to bf16, to nearest even, bit for bit what oneDNN 2.6.3's f32 -> bf16
// reorder gives (test/nn/bf16_weights_test.cpp compares them, NaN, infinities, subnormals and
// ties included): common/HalfConvert's VCVTNEPS2BF16 kernel, in chunks over the OpenMP threads.
void narrow_to_bf16(const float* src, std::uint16_t* dst, std::size_t count);

}  // namespace ringtrain
