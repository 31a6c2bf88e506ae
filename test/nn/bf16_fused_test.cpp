// WeightCopy::narrow_part, the narrowing an optimizer's update observer runs block by block:
// narrow_to_bf16's bits, no second narrowing at the next refresh when one write covered the
// tensor exactly once, and a full narrowing again after anything else.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "layer_harness.h"
#include "nn/DnnlContext.h"
#include "nn/Layer.h"
#include "nn/Model.h"
#include "nn/Precision.h"
#include "nn/WeightCopy.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

std::vector<std::uint16_t> codes_of(const WeightCopy& c, std::size_t n) {
  const auto* p = static_cast<const std::uint16_t*>(c.get().get_data_handle());
  return {p, p + n};
}

std::vector<std::uint16_t> narrowed(const std::vector<float>& w) {
  std::vector<std::uint16_t> out(w.size());
  narrow_to_bf16(w.data(), out.data(), w.size());
  return out;
}

// Rounding cases (ties, NaN, infinities, subnormals) among random values.
std::vector<float> probe_weights(std::size_t n, std::uint64_t seed) {
  std::vector<float> w = random_floats(n, seed, -3.f, 3.f);
  const std::uint32_t bits[] = {0x3F808000u, 0x3F818000u, 0x7FC00000u, 0xFF800000u, 0x00000001u, 0x807FFFFFu};
  for (std::size_t k = 0; k < std::size(bits); ++k) std::memcpy(&w[k * 7], &bits[k], sizeof(float));
  return w;
}

}  // namespace

TEST_CASE("narrow_part under one write gives narrow_to_bf16's bits and spares the next refresh", "[nn][bf16]") {
  using dnnl::memory;
  auto& eng = DnnlContext::get().engine();
  const std::size_t n = 40 * 33;  // not a multiple of the vector width
  std::vector<float> w = probe_weights(n, 1);
  const memory user(plain_md({40, 33}), eng, w.data());
  ParamsVersion version;
  WeightCopy copy(user, plain_md({40, 33}, memory::data_type::bf16));
  copy.refresh(version);
  REQUIRE(copy.conversions() == 1);

  // An update through one ParamsSpan, reported in three uneven ranges, in order.
  {
    ParamsSpan span(std::span<float>(w), version);
    for (float& x : w) x = -x * 0.75f;
    copy.narrow_part(0, 100, version);
    copy.narrow_part(100, 901, version);
    CHECK(copy.conversions() == 1);  // counted once the tensor is covered
    copy.narrow_part(1001, n - 1001, version);
    CHECK(copy.conversions() == 2);
  }
  copy.refresh(version);
  copy.refresh(version);
  CHECK(copy.conversions() == 2);  // nothing narrowed again
  CHECK(codes_of(copy, n) == narrowed(w));

  SECTION("a partial cover leaves the whole tensor to refresh") {
    {
      ParamsSpan span(std::span<float>(w), version);
      for (float& x : w) x += 0.25f;
      copy.narrow_part(0, n - 1, version);
    }
    copy.refresh(version);
    CHECK(copy.conversions() == 3);
    CHECK(codes_of(copy, n) == narrowed(w));
  }
  SECTION("a second writer makes the narrowing untrusted") {
    {
      ParamsSpan span(std::span<float>(w), version);
      ParamsSpan other(span);
      for (float& x : w) x *= 2.0f;
      copy.narrow_part(0, n, version);
    }
    CHECK(copy.conversions() == 2);
    copy.refresh(version);
    CHECK(copy.conversions() == 3);
    CHECK(codes_of(copy, n) == narrowed(w));
  }
  SECTION("a later write (a load, a broadcast) makes the copy stale again") {
    {
      ParamsSpan span(std::span<float>(w), version);
      copy.narrow_part(0, n, version);
    }
    {
      ParamsSpan load(std::span<float>(w), version);
      std::fill(w.begin(), w.end(), 0.5f);
    }
    copy.refresh(version);
    CHECK(copy.conversions() == 4);
    CHECK(codes_of(copy, n) == narrowed(w));
  }
  SECTION("a range outside the tensor or a copy that does not narrow is refused") {
    ParamsSpan span(std::span<float>(w), version);
    CHECK_THROWS_AS(copy.narrow_part(n - 10, 11, version), std::logic_error);
    WeightCopy blocked(user, memory::desc({40, 33}, memory::data_type::bf16, memory::format_tag::ba));
    CHECK_THROWS_AS(blocked.narrow_part(0, 1, version), std::logic_error);
  }
}

