#include "nn/Precision.h"

#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {

std::string_view precision_name(Precision p) noexcept { return p == Precision::kBf16 ? "bf16" : "fp32"; }

Precision parse_precision(std::string_view name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  throw std::invalid_argument(fmt::format("precision '{}': expected fp32 or bf16", name));
}

dnnl::memory::data_type compute_type(Precision p) noexcept {
  return p == Precision::kBf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}

std::string_view isa_name(dnnl::cpu_isa isa) noexcept {
  using I = dnnl::cpu_isa;
  switch (isa) {
    case I::all: return "all";
    case I::sse41: return "sse41";
    case I::avx: return "avx";
    case I::avx2: return "avx2";
    case I::avx2_vnni: return "avx2_vnni";
    case I::avx512_mic: return "avx512_mic";
    case I::avx512_mic_4ops: return "avx512_mic_4ops";
    case I::avx512_core: return "avx512_core";
    case I::avx512_core_vnni: return "avx512_core_vnni";
    case I::avx512_core_bf16: return "avx512_core_bf16";
    case I::avx512_core_amx: return "avx512_core_amx";
  }
  return "unknown";
}

bool isa_has_native_bf16(dnnl::cpu_isa isa) noexcept {
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

dnnl::cpu_isa effective_isa() { return dnnl::get_effective_cpu_isa(); }

std::string precision_refusal_here(Precision p) { return precision_refusal(p, effective_isa()); }

std::string precision_refusal(Precision p, dnnl::cpu_isa isa) {
  if (p != Precision::kBf16 || isa_has_native_bf16(isa)) return {};
  return fmt::format(
      "--precision bf16 needs a CPU with native bf16 (oneDNN ISA avx512_core_bf16 or avx512_core_amx); this one "
      "runs {}: use --precision fp32",
      isa_name(isa));
}

}  // namespace ringtrain
