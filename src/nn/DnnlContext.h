// The process-wide oneDNN CPU engine and stream every layer executes on.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace ringtrain {

class DnnlContext {
 public:
  // The one context of this process, created on first use.
  static DnnlContext& get();

  dnnl::engine& engine() noexcept { return engine_; }
  dnnl::stream& stream() noexcept { return stream_; }

 private:
  DnnlContext();
  dnnl::engine engine_;
  dnnl::stream stream_;
};

}  // namespace ringtrain
