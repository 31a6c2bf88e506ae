// One CPU engine and one in-order stream per process (oneDNN primitives are reusable
// across calls, so there is nothing to gain from more).
#include "nn/DnnlContext.h"

namespace ringtrain {

DnnlContext::DnnlContext() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}

DnnlContext& DnnlContext::get() {
  static DnnlContext context;
  return context;
}

}  // namespace ringtrain
