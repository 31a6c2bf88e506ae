// The layers' weight copies (nn/WeightCopy): the bf16 narrowing against oneDNN's reorder bit
// for bit; one conversion per parameter change, however many forwards run between changes,
// and never a stale copy (each forward after an update computes what a fresh model with the
// updated parameters computes, bit for bit). And the state bf16 kernels leave behind: after
// a bf16 forward and backward the upper halves of the vector registers are free again (the
// baseline SSE code that follows, the optimizer's loop, would otherwise run several times
// slower).
#include <catch2/catch.hpp>

#include <cpuid.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "common/HalfConvert.h"
#include "layer_harness.h"
#include "nn/DnnlContext.h"
#include "nn/Layer.h"
#include "nn/Model.h"
#include "nn/Precision.h"
#include "nn/WeightCopy.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

bool native_bf16() { return isa_has_native_bf16(effective_isa()); }

// XINUSE (XGETBV with ECX = 1) bits 2 and 6: the upper halves of ymm 0-15 and of zmm 0-15 are
// not in their initial state. nullopt where the CPU cannot report it.
std::optional<bool> upper_vector_state_in_use() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & bit_OSXSAVE) == 0) return std::nullopt;
  __cpuid_count(0xD, 1, eax, ebx, ecx, edx);
  if ((eax & (1u << 2)) == 0) return std::nullopt;
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
  return (lo & ((1u << 2) | (1u << 6))) != 0;
}

}  // namespace

TEST_CASE("A bf16 forward and backward leave the upper vector state clean", "[nn][bf16]") {
  if (!native_bf16() || !upper_vector_state_in_use()) {
    WARN("skipped: no native bf16, or the CPU does not report XINUSE");
    return;
  }
  // The MLP: oneDNN 2.6.3's bf16 inner-product backward returns with that state in use.
  Model m("mlp", {3, 8, 8}, 10);
  m.set_precision(Precision::kBf16);
  const int n = 4;
  const auto x = random_floats(3 * 8 * 8 * n, 5);
  const std::vector<std::int32_t> y{1, 2, 3, 4};
  for (int step = 0; step < 2; ++step) {
    m.forward(x.data(), y.data(), n, Phase::kTrain, 1);
    CHECK_FALSE(*upper_vector_state_in_use());
    m.backward();
    CHECK_FALSE(*upper_vector_state_in_use());
  }
}

namespace {

std::uint32_t bits_of(float v) {
  std::uint32_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

float float_of(std::uint32_t b) {
  float v = 0;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

// oneDNN's f32 -> bf16 reorder of plain vectors: what WeightCopy ran before narrow_to_bf16.
std::vector<std::uint16_t> reorder_to_bf16(std::vector<float> src) {
  using dnnl::memory;
  auto& eng = DnnlContext::get().engine();
  const memory::dims dims{static_cast<memory::dim>(src.size())};
  memory from({dims, memory::data_type::f32, memory::format_tag::a}, eng, src.data());
  std::vector<std::uint16_t> out(src.size());
  memory to({dims, memory::data_type::bf16, memory::format_tag::a}, eng, out.data());
  dnnl::reorder(from, to).execute(DnnlContext::get().stream(), from, to);
  DnnlContext::get().stream().wait();
  return out;
}

// Random bit patterns (every exponent, NaNs with payloads, subnormals) and the edge cases:
// signed zeros, infinities, the smallest and largest subnormals and normals, values that
// round up into infinity, and exact ties below and above an even and an odd bf16.
std::vector<float> narrowing_probes() {
  std::vector<float> v;
  Rng rng(11);
  for (int i = 0; i < 150000; ++i) v.push_back(float_of(static_cast<std::uint32_t>(rng.next())));
  for (int i = 0; i < 50000; ++i) v.push_back(rng.uniform(-4.f, 4.f));
  for (std::uint32_t b : {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u,
                          0x7F800001u, 0x7FBFFFFFu, 0xFF812345u, 0x7FFFFFFFu, 0x00000001u, 0x80000001u,
                          0x007FFFFFu, 0x807FFFFFu, 0x00008000u, 0x00018000u, 0x00800000u, 0x80800000u,
                          0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F7F8000u, 0x7F7F7FFFu, 0x3F808000u, 0x3F818000u,
                          0xBF808000u, 0xBF818000u, 0x3F80FFFFu, 0x3F807FFFu, 0x3F808001u})
    v.push_back(float_of(b));
  for (std::uint32_t b = 0x3F800000u; b < 0x3F820000u; b += 0x4000u) v.push_back(float_of(b | 0x8000u));
  v.push_back(1.0f);  // an odd count: the vector kernel's tail too
  return v;
}

}  // namespace

TEST_CASE("narrow_to_bf16 gives oneDNN's f32 -> bf16 reorder bit for bit", "[nn][bf16]") {
  const std::vector<float> src = narrowing_probes();
  REQUIRE(src.size() > (std::size_t{1} << 17));  // several of narrow_to_bf16's chunks
  std::vector<std::uint16_t> want = reorder_to_bf16(src);
  std::vector<std::uint16_t> got(src.size()), scalar(src.size());
  narrow_to_bf16(src.data(), got.data(), src.size());
  narrow(Compression::kBf16, src.data(), scalar.data(), src.size(), HalfPath::kScalar);
  // Where the CPU has no native bf16, oneDNN converts through its reference code, which
  // drops the sign of -0.0 (0x80000000 -> 0x0000; seen with oneDNN 2.6.3 on an AVX2 AMD EPYC).
  // Narrowing keeps it (0x8000, the truncation IEEE asks for), as the native path does. Those
  // CPUs never run bf16 compute, so no weight copy can disagree with a reorder there; every
  // other value must still match bit for bit.
  if (!native_bf16()) {
    for (std::size_t i = 0; i < src.size(); ++i)
      if (bits_of(src[i]) == 0x80000000u && want[i] == 0x0000u) want[i] = 0x8000u;
  }
  std::size_t differ = 0, scalar_differ = 0;
  for (std::size_t i = 0; i < src.size(); ++i) {
    if (got[i] != want[i] && differ++ < 5)
      UNSCOPED_INFO("f32 0x" << std::hex << bits_of(src[i]) << ": reorder 0x" << want[i] << ", narrowed 0x" << got[i]);
    if (scalar[i] != want[i] && scalar_differ++ < 5)
      UNSCOPED_INFO("f32 0x" << std::hex << bits_of(src[i]) << ": reorder 0x" << want[i] << ", scalar 0x" << scalar[i]);
  }
  INFO("vectorised on this CPU: " << half_vectorised(Compression::kBf16));
  CHECK(differ == 0);
  CHECK(scalar_differ == 0);
}

namespace {

std::uint64_t weight_conversions(const Model& m) {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < m.num_layers(); ++i) n += m.layer(i).weight_conversions();
  return n;
}

// Logits of a model built afresh with m's parameters and precision: what the next forward of
// m must give if its weight copies hold the current parameters. Reads m through the const
// params(), which leaves its copies alone.
std::vector<float> fresh_logits(const Model& m, const std::vector<float>& x, const std::vector<std::int32_t>& y,
                                Phase phase) {
  Model fresh(m.name(), m.input_shape(), m.classes());
  fresh.set_precision(m.precision());
  const auto p = m.params();
  std::copy(p.begin(), p.end(), fresh.params().begin());
  fresh.forward(x.data(), y.data(), static_cast<int>(y.size()), phase, 5);
  return {fresh.logits().begin(), fresh.logits().end()};
}

// Steps of `micro` forward/backward pairs and an eval forward, then an SGD update through
// params(), as --accumulate (and --logical-shards) run them. Every forward equals a fresh
// model's with the current parameters (after an update, too), and a step costs exactly one
// conversion per weight copy, whatever `micro` is.
void check_once_per_update(const std::string& name, ImageShape shape, Precision precision, int micro) {
  INFO(name << " " << precision_name(precision) << ", " << micro << " micro-batches per step");
  Model m(name, shape, 10);
  m.set_precision(precision);
  m.init(3);
  const int n = 2;
  const std::vector<std::int32_t> y{3, 7};
  std::uint64_t per_update = 0;
  for (int step = 0; step < 3; ++step) {
    const std::uint64_t before = weight_conversions(m);
    for (int k = 0; k <= micro; ++k) {
      const Phase phase = k < micro ? Phase::kTrain : Phase::kEval;
      const auto x = random_floats(shape.numel() * n, 100 + static_cast<std::uint64_t>(step * micro + k));
      m.forward(x.data(), y.data(), n, phase, 5);
      const std::vector<float> got(m.logits().begin(), m.logits().end());
      CHECK(got == fresh_logits(std::as_const(m), x, y, phase));
      if (phase == Phase::kTrain) m.backward();
    }
    const std::uint64_t converted = weight_conversions(m) - before;
    if (step == 0) per_update = converted;
    CHECK(converted == per_update);
    const auto g = m.grads();
    const auto p = m.params();  // the update, as Optimizer::step is handed it
    for (std::size_t i = 0; i < p.size(); ++i) p[i] -= 0.05f * g[i];
  }
  if (precision == Precision::kBf16) CHECK(per_update > 0);
}

}  // namespace

TEST_CASE("Weight copies convert once per parameter update and are never stale", "[nn][bf16]") {
  // fp32 lenet5: blocked convolution weights (reordered copies); fp32 mlp: none (the arena).
  check_once_per_update("lenet5", {1, 28, 28}, Precision::kFp32, 3);
  check_once_per_update("mlp", {3, 8, 8}, Precision::kFp32, 2);
  if (!native_bf16()) {
    WARN("bf16 part skipped: no native bf16 on this CPU");
    return;
  }
  // bf16: narrowed plain copies (mlp's inner products) and reordered blocked ones (convolutions).
  check_once_per_update("mlp", {3, 8, 8}, Precision::kBf16, 1);
  check_once_per_update("mlp", {3, 8, 8}, Precision::kBf16, 3);
  check_once_per_update("lenet5", {1, 28, 28}, Precision::kBf16, 2);
}

TEST_CASE("Writes through a ParamsSpan kept across forwards are seen by each forward", "[nn][bf16]") {
  // The gradient check's pattern: one writable span, a parameter nudged between forwards.
  for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
    if (precision == Precision::kBf16 && !native_bf16()) continue;
    INFO(precision_name(precision));
    Model m("lenet5", {1, 28, 28}, 10);
    m.set_precision(precision);
    const std::vector<std::int32_t> y{2};
    const auto x = random_floats(28 * 28, 9);
    auto p = m.params();
    for (int k = 0; k < 3; ++k) {
      for (std::size_t i = 0; i < p.size(); i += 7) p[i] *= 1.5f;
      m.forward(x.data(), y.data(), 1, Phase::kEval);
      const std::vector<float> got(m.logits().begin(), m.logits().end());
      CHECK(got == fresh_logits(std::as_const(m), x, y, Phase::kEval));
    }
  }
}

TEST_CASE("bf16 inner-product weights are narrowed, blocked convolution weights reordered", "[nn][bf16]") {
  if (!native_bf16()) {
    WARN("skipped: no native bf16 on this CPU");
    return;
  }
  using dnnl::memory;
  auto& eng = DnnlContext::get().engine();
  std::vector<float> w = random_floats(6 * 5, 2);
  const memory user(plain_md({6, 5}), eng, w.data());
  ParamsVersion version;
  WeightCopy same(user, plain_md({6, 5}));
  same.refresh(version);
  CHECK(same.get().get_data_handle() == w.data());
  CHECK(same.conversions() == 0);
  WeightCopy narrowed(user, plain_md({6, 5}, memory::data_type::bf16));
  CHECK(narrowed.narrows());
  narrowed.refresh(version);
  narrowed.refresh(version);
  CHECK(narrowed.conversions() == 1);
  ++version.value;
  narrowed.refresh(version);
  CHECK(narrowed.conversions() == 2);
  ++version.writers;  // a ParamsSpan alive: every refresh converts
  narrowed.refresh(version);
  narrowed.refresh(version);
  CHECK(narrowed.conversions() == 4);
  const auto* codes = static_cast<const std::uint16_t*>(narrowed.get().get_data_handle());
  CHECK(std::vector<std::uint16_t>(codes, codes + w.size()) == reorder_to_bf16(w));
  WeightCopy blocked(user, memory::desc({6, 5}, memory::data_type::bf16, memory::format_tag::ba));
  CHECK_FALSE(blocked.narrows());

  // In the zoo: every bf16 mlp copy is narrowed (plain inner-product weights).
  Model m("mlp", {3, 8, 8}, 10);
  m.set_precision(Precision::kBf16);
  const std::vector<std::int32_t> y{1};
  const auto x = random_floats(3 * 8 * 8, 4);
  m.forward(x.data(), y.data(), 1, Phase::kTrain, 1);
  std::size_t linear_layers = 0;
  for (std::size_t i = 0; i < m.num_layers(); ++i)
    if (m.layer(i).kind() == "linear") {
      ++linear_layers;
      CHECK(m.layer(i).weight_conversions() == 1);
    }
  CHECK(linear_layers == 7);
}

TEST_CASE("bf16 backward-data weights reordered from the forward's copy equal those from the arena", "[nn][bf16]") {
  if (!native_bf16()) {
    WARN("skipped: no native bf16 on this CPU");
    return;
  }
  // A 32 -> 32 3x3 convolution: oneDNN's bf16 forward and backward-data want different blocked
  // weights (ABcd8b16a2b and ABcd8a16b2a on AVX512-BF16).
  using dnnl::memory;
  auto& eng = DnnlContext::get().engine();
  const ConvPds pds = conv3x3_forward_and_backward_data(memory::data_type::bf16, 2, 32, 4);
  const auto& fwd_pd = pds.fwd;
  const auto& bwd_pd = pds.bwd_data;
  REQUIRE(fwd_pd.weights_desc() != bwd_pd.weights_desc());

  // Probes with every rounding case; the conv's 9216 weights cycle through them.
  const std::vector<float> probes = narrowing_probes();
  std::vector<float> w(32 * 32 * 9);
  for (std::size_t k = 0; k < w.size(); ++k) w[k] = probes[(k * 37) % probes.size()];
  const memory user(plain_md({32, 32, 3, 3}), eng, w.data());
  auto forward = std::make_shared<WeightCopy>(user, fwd_pd.weights_desc());
  WeightCopy derived(forward, bwd_pd.weights_desc());
  WeightCopy direct(user, bwd_pd.weights_desc());
  CHECK(derived.source() == forward.get());
  const auto bytes = [](const WeightCopy& c) {
    const auto* p = static_cast<const std::uint8_t*>(c.get().get_data_handle());
    return std::vector<std::uint8_t>(p, p + c.get().get_desc().get_size());
  };
  ParamsVersion version;
  for (int update = 0; update < 2; ++update) {
    derived.refresh(version);  // refreshes the forward's copy first, as it was not yet
    direct.refresh(version);
    CHECK(forward->conversions() == static_cast<std::uint64_t>(update + 1));
    CHECK(bytes(derived) == bytes(direct));
    for (auto& v : w) v = -v * 0.5f;
    ++version.value;
  }
}
