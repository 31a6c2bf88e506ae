// WeightCopy (see WeightCopy.h). Converting the weights is the one per-step cost bf16 adds
// over fp32: for the MLP's 3.8 M parameters oneDNN's generic reorder (jit:uni) took about as
// long as the bf16 forward GEMMs (docs/benchmarks/bf16-compute.md), hence the plain-layout
// narrowing with the AVX512-BF16 instruction, and the version check that converts once per
// parameter change rather than once per forward (--accumulate, --logical-shards).
#include "nn/WeightCopy.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "common/HalfConvert.h"
#include "nn/DnnlContext.h"
#include "nn/Layer.h"

namespace ringtrain {

using dnnl::memory;

WeightCopy::WeightCopy(const memory& user, const memory::desc& wanted) : user_(user) {
  const memory::desc& user_md = user.get_desc();
  auto& eng = DnnlContext::get().engine();
  if (user_md == wanted) {
    copy_ = user;
    aliases_ = true;
    return;
  }
  copy_ = memory(wanted, eng);
  const Dims dims = md_dims(user_md);
  narrows_ = user_md == plain_md(dims) && wanted == plain_md(dims, memory::data_type::bf16);
  if (!narrows_) reorder_ = dnnl::reorder(user_, copy_);
}

WeightCopy::WeightCopy(std::shared_ptr<WeightCopy> source, const memory::desc& wanted)
    : source_(std::move(source)), user_(source_->get()) {
  copy_ = memory(wanted, DnnlContext::get().engine());
  reorder_ = dnnl::reorder(user_, copy_);
}

namespace {
std::size_t floats_of(const memory& m) { return m.get_desc().get_size() / sizeof(float); }
}  // namespace

void WeightCopy::narrow_part(std::size_t begin, std::size_t count, const ParamsVersion& version) {
  const std::size_t total = floats_of(user_);
  if (!narrows_ || begin > total || count > total - begin) {
    throw std::logic_error("WeightCopy::narrow_part: not a narrowing copy, or a range outside the tensor");
  }
  // Another writer may change any float after this narrowing: leave it all to refresh().
  if (version.writers != 1) {
    fused_ = 0;
    return;
  }
  if (fused_at_ != version.value) {
    fused_at_ = version.value;
    fused_ = 0;
  }
  narrow(Compression::kBf16, static_cast<const float*>(user_.get_data_handle()) + begin,
         static_cast<std::uint16_t*>(copy_.get_data_handle()) + begin, count);
  fused_ += count;
  if (fused_ == total) ++conversions_;
}

void WeightCopy::refresh(const ParamsVersion& version) {
  if (aliases_ || (valid_ && version.unchanged_since(version_))) return;
  // The whole tensor was narrowed during the one write that has ended since (narrow_part):
  // converted at the version that write's end made.
  if (narrows_ && fused_ == floats_of(user_) && version.writers == 0 && version.value == fused_at_ + 1) {
    valid_ = true;
    version_ = version.value;
    fused_ = 0;
    return;
  }
  if (source_) source_->refresh(version);
  if (narrows_) {
    narrow_to_bf16(static_cast<const float*>(user_.get_data_handle()),
                   static_cast<std::uint16_t*>(copy_.get_data_handle()), floats_of(user_));
  } else {
    auto& strm = DnnlContext::get().stream();
    reorder_.execute(strm, user_, copy_);
    strm.wait();
  }
  valid_ = true;
  version_ = version.value;
  ++conversions_;
}

void narrow_to_bf16(const float* src, std::uint16_t* dst, std::size_t count) {
  // Chunks of 64 Ki floats (256 KiB read) shared out over the threads; one chunk runs alone.
  constexpr std::size_t kChunk = std::size_t{1} << 16;
  const auto chunks = static_cast<std::int64_t>((count + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::size_t begin = static_cast<std::size_t>(c) * kChunk;
    narrow(Compression::kBf16, src + begin, dst + begin, std::min(kChunk, count - begin));
  }
}

}  // namespace ringtrain
