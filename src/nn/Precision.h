// Precision: the data type the layers compute in. fp32 everywhere, or bf16 activations
// and weights inside the oneDNN primitives with fp32 master weights, fp32 weight
// gradients, fp32 loss and metrics (design.md, "bf16 compute").
#pragma once

#include <string>
#include <string_view>

#include <oneapi/dnnl/dnnl.hpp>

namespace ringtrain {

enum class Precision { kFp32, kBf16 };

// "fp32" | "bf16".
std::string_view precision_name(Precision p) noexcept;
// Inverse of precision_name; throws std::invalid_argument naming the value otherwise.
Precision parse_precision(std::string_view name);

// The oneDNN data type activations and weights take inside the primitives.
dnnl::memory::data_type compute_type(Precision p) noexcept;

// oneDNN's name for an ISA ("avx512_core_bf16"), as ONEDNN_MAX_CPU_ISA spells it, lower case.
std::string_view isa_name(dnnl::cpu_isa isa) noexcept;
// True where oneDNN runs bf16 on native instructions (AVX512-BF16 or AMX), not emulated.
bool isa_has_native_bf16(dnnl::cpu_isa isa) noexcept;

// The ISA oneDNN dispatches to in this process (honours ONEDNN_MAX_CPU_ISA).
dnnl::cpu_isa effective_isa();

// Why precision p cannot run on a CPU whose effective oneDNN ISA is isa, as one line; empty
// when it can. fp32 runs everywhere; bf16 needs native bf16, never a silent emulation.
std::string precision_refusal(Precision p, dnnl::cpu_isa isa);
// precision_refusal on this CPU.
std::string precision_refusal_here(Precision p);

}  // namespace ringtrain
