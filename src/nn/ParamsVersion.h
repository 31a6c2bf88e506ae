// ParamsVersion and ParamsSpan: how the layers' weight copies (nn/WeightCopy) know whether
// the model's fp32 parameters changed since they were converted, with no way for a write to
// go unseen: a write needs a ParamsSpan, every forward while one lives converts afresh, and
// its end marks the copies stale.
#pragma once

#include <cstdint>
#include <span>

namespace ringtrain {

struct ParamsVersion {
  std::uint64_t value = 0;  // changes whenever writable access ends (and at init)
  int writers = 0;          // ParamsSpans alive: copies cannot be trusted until they end

  // True when a copy converted at version `seen` still holds the parameters.
  bool unchanged_since(std::uint64_t seen) const noexcept { return writers == 0 && value == seen; }
};

// Model::params(): the parameters, writable while this object lives. It is a std::span<float>
// (pass it where one is taken, e.g. Optimizer::step, within the same expression), but keep
// this object, not a std::span copied out of it, for as long as you write.
class ParamsSpan : public std::span<float> {
 public:
  ParamsSpan(std::span<float> params, ParamsVersion& version) noexcept : std::span<float>(params), version_(&version) {
    ++version_->writers;
  }
  ParamsSpan(const ParamsSpan& other) noexcept : std::span<float>(other), version_(other.version_) {
    ++version_->writers;
  }
  ParamsSpan& operator=(const ParamsSpan&) = delete;
  ~ParamsSpan() {
    --version_->writers;
    ++version_->value;
  }

 private:
  ParamsVersion* version_;
};

}  // namespace ringtrain
