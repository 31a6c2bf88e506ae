// Layer graphs: the multi-input layers (Add with and without its fused ReLU, Concat) against
// double references and their central differences, in plain and blocked layouts; gradient
// sums where a tensor has several readers, a residual shortcut reading the add's gradient in
// place of a copy; Kahn order and the graph's refusals.
#include <catch2/catch.hpp>

#include <memory>

#include "layer_harness.h"
#include "model_harness.h"
#include "nn/Add.h"
#include "nn/Concat.h"
#include "nn/Conv2d.h"
#include "nn/Flatten.h"
#include "nn/Graph.h"
#include "nn/GraphPlan.h"
#include "nn/Linear.h"
#include "nn/Precision.h"
#include "nn/ReLU.h"

using namespace ringtrain;
using namespace ringtrain::test;
using dnnl::memory;
using tag = memory::format_tag;

namespace {

// Forward and backward of a multi-input layer on plain buffers: x holds the inputs back to
// back, dx receives their gradients back to back. tags[k]: the layout input k arrives in.
LayerRun run_multi(Layer& layer, const std::vector<Dims>& in, const std::vector<float>& x, const std::vector<float>& dy,
                   const std::vector<tag>& tags) {
  auto& eng = DnnlContext::get().engine();
  auto& strm = DnnlContext::get().stream();
  layer.bind_params({}, {});
  std::vector<memory::desc> mds;
  for (std::size_t k = 0; k < in.size(); ++k)
    mds.push_back(tags[k] == tag::undef ? plain_md(in[k])
                                        : memory::desc(memory::dims(in[k].begin(), in[k].end()),
                                                       memory::data_type::f32, tags[k]));
  layer.prepare_inputs(mds, Phase::kTrain, true);
  std::vector<float> xs = x;
  std::vector<memory> srcs, diffs;
  std::size_t off = 0;
  for (std::size_t k = 0; k < in.size(); ++k) {
    memory user(plain_md(in[k]), eng, xs.data() + off);
    srcs.emplace_back(layer.input_md(k), eng);
    dnnl::reorder(user, srcs.back()).execute(strm, user, srcs.back());
    diffs.emplace_back(layer.diff_input_md(k), eng);
    off += numel(in[k]);
  }
  const Dims out = layer.out_shape_of(in);
  memory dst(layer.dst_md(), eng);
  layer.forward_inputs(srcs, dst, Phase::kTrain);
  LayerRun r;
  r.y.resize(numel(out));
  memory y_user(plain_md(out), eng, r.y.data());
  dnnl::reorder(dst, y_user).execute(strm, dst, y_user);
  std::vector<float> dys = dy;
  memory dy_user(plain_md(out), eng, dys.data());
  memory diff_dst(layer.diff_dst_md(), eng);
  dnnl::reorder(dy_user, diff_dst).execute(strm, dy_user, diff_dst);
  layer.backward_inputs(diff_dst, diffs);
  r.dx.resize(x.size());
  off = 0;
  for (std::size_t k = 0; k < in.size(); ++k) {
    memory user(plain_md(in[k]), eng, r.dx.data() + off);
    dnnl::reorder(diffs[k], user).execute(strm, diffs[k], user);
    off += numel(in[k]);
  }
  strm.wait();
  return r;
}

void check_multi(Layer& layer, const std::vector<Dims>& in, const RefForward& ref, const std::vector<tag>& tags) {
  std::size_t n = 0;
  for (const auto& d : in) n += numel(d);
  const auto x = random_floats(n, 11);
  const auto dy = random_floats(numel(layer.out_shape_of(in)), 12);
  const LayerRun r = run_multi(layer, in, x, dy, tags);
  const RefGrads ref_grads = reference_grads(ref, to_double(x), {}, to_double(dy));
  INFO(layer.describe());
  CHECK(rel_error(r.y, ref_grads.y) < 1e-6);
  CHECK(rel_error(r.dx, ref_grads.dx) < 1e-6);
}

// y = x0 + x1 (+ ReLU): x holds both inputs back to back.
RefForward add_ref(bool relu) {
  return [relu](const Vec& x, const std::vector<Vec>&) {
    const std::size_t half = x.size() / 2;
    Vec y(half);
    for (std::size_t i = 0; i < half; ++i) y[i] = relu ? std::max(x[i] + x[half + i], 0.0) : x[i] + x[half + i];
    return y;
  };
}

}  // namespace

TEST_CASE("Add matches x0 + x1 and its central differences, with and without the fused ReLU", "[nn][graph]") {
  // Sums uniform in [-2, 2): the chance that one lies within eps of the ReLU's kink is ~1e-6.
  for (const bool relu : {false, true}) {
    Add plain("add", 2, relu);
    check_multi(plain, {{2, 3, 4, 5}, {2, 3, 4, 5}}, add_ref(relu), {tag::undef, tag::undef});
    Add mixed("add", 2, relu);  // input 1 in another layout than input 0
    check_multi(mixed, {{2, 16, 3, 3}, {2, 16, 3, 3}}, add_ref(relu), {tag::nChw16c, tag::undef});
  }
  const RefForward sum3 = [](const Vec& x, const std::vector<Vec>&) {
    const std::size_t third = x.size() / 3;
    Vec y(third);
    for (std::size_t i = 0; i < third; ++i) y[i] = x[i] + x[third + i] + x[2 * third + i];
    return y;
  };
  Add three("add", 3);
  check_multi(three, {{2, 5}, {2, 5}, {2, 5}}, sum3, {tag::undef, tag::undef, tag::undef});
  CHECK_THROWS_AS(Add("add", 3, true), std::invalid_argument);
  CHECK_THROWS_AS(Add("add", 1), std::invalid_argument);
  CHECK_THROWS_AS(Add("add").out_shape_of({{1, 3, 4, 4}, {1, 3, 4, 5}}), std::invalid_argument);
}

TEST_CASE("Add and Concat in bf16 match the fp32 references within bf16 rounding", "[nn][graph][bf16]") {
  const auto isa = dnnl::get_effective_cpu_isa();
  if (isa != dnnl::cpu_isa::avx512_core && isa != dnnl::cpu_isa::avx512_core_vnni && !isa_has_native_bf16(isa)) {
    WARN("skipped: oneDNN runs no bf16 on this CPU");
    return;
  }
  const Dims d{2, 16, 3, 3};
  const auto x = random_floats(2 * numel(d), 31);
  const auto dy = random_floats(numel(d), 32);
  for (const bool relu : {false, true}) {
    Add add("add", 2, relu);
    add.set_compute_type(memory::data_type::bf16);
    const LayerRun r = run_multi(add, {d, d}, x, dy, {tag::nChw16c, tag::undef});
    const RefGrads ref = reference_grads(add_ref(relu), to_double(x), {}, to_double(dy));
    CHECK(add.dst_md().data_type() == memory::data_type::bf16);
    CHECK(rel_error(r.y, ref.y) < 2e-2);
    CHECK(rel_error(r.dx, ref.dx) < 2e-2);
  }
  Concat concat("concat", 2);
  concat.set_compute_type(memory::data_type::bf16);
  const Dims joined{2, 32, 3, 3};
  const auto dy2 = random_floats(numel(joined), 33);
  const LayerRun r = run_multi(concat, {d, d}, x, dy2, {tag::undef, tag::nChw16c});
  CHECK(concat.dst_md().data_type() == memory::data_type::bf16);
  const std::size_t per = numel(d) / 2;  // one sample of one input
  Vec y_ref, dx_ref(x.size());
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t k = 0; k < 2; ++k) {
      y_ref.insert(y_ref.end(), x.begin() + k * numel(d) + n * per, x.begin() + k * numel(d) + (n + 1) * per);
      for (std::size_t j = 0; j < per; ++j) dx_ref[k * numel(d) + n * per + j] = dy2[(2 * n + k) * per + j];
    }
  // Concat only moves values: exact up to the bf16 rounding of each one (2^-9 relative).
  CHECK(rel_error(r.y, y_ref) < 4e-3);
  CHECK(rel_error(r.dx, dx_ref) < 4e-3);
}

TEST_CASE("Concat joins channels and hands each input its slice of the gradient", "[nn][graph]") {
  const Dims a{2, 3, 4, 5}, b{2, 16, 4, 5};
  const RefForward ref = [&](const Vec& x, const std::vector<Vec>&) {
    Vec y;
    const std::size_t na = numel(a) / 2, nb = numel(b) / 2;  // per sample
    for (std::size_t s = 0; s < 2; ++s) {
      y.insert(y.end(), x.begin() + s * na, x.begin() + (s + 1) * na);
      y.insert(y.end(), x.begin() + numel(a) + s * nb, x.begin() + numel(a) + (s + 1) * nb);
    }
    return y;
  };
  Concat plain("concat", 2);
  CHECK(plain.out_shape_of({a, b}) == Dims{2, 19, 4, 5});
  check_multi(plain, {a, b}, ref, {tag::undef, tag::undef});
  Concat blocked("concat", 2);
  check_multi(blocked, {a, b}, ref, {tag::undef, tag::nChw16c});
  CHECK_THROWS_AS(Concat("concat", 2).out_shape_of({{1, 3, 4, 4}, {1, 3, 5, 4}}), std::invalid_argument);
}

namespace {

// input -> conv0 = x; x -> conva, x -> convb; add(a, b) [-> relu] -> flatten -> fc: x has two
// readers, so conv0's gradient is right only if both branches' gradients are summed.
Graph diamond(bool fused, bool same_twice) {
  Graph g;
  g.add(std::make_unique<Conv2d>("conv0", 2, 4, 3, 1, 1), {"input"});
  g.add(std::make_unique<Conv2d>("conva", 4, 4, 3, 1, 1), {"conv0"});
  g.add(std::make_unique<Conv2d>("convb", 4, 4, 1), {"conv0"});
  if (same_twice)  // one reader taking x twice: 2x, plus a branch
    g.add(std::make_unique<Add>("twice", 2), {"conv0", "conv0"});
  g.add(std::make_unique<Add>("add", 2, fused), {"conva", same_twice ? "twice" : "convb"});
  g.add(std::make_unique<Flatten>("flatten"), {"add"});
  g.add(std::make_unique<Linear>("fc", 4 * 5 * 5, 3), {"flatten"});
  return g;
}

}  // namespace

TEST_CASE("A tensor with several readers receives the sum of their gradients", "[nn][graph]") {
  const ImageShape shape{2, 5, 5};
  for (const bool fused : {false, true}) {
    Model m("diamond", diamond(fused, false), shape, 3);
    m.init(7);
    gradient_check(m, random_batch(shape, 4, 3, 5));
  }
  // With the second branch replaced, nothing reads convb: a dangling tensor is refused.
  CHECK_THROWS_AS(Model("diamond", diamond(false, true), shape, 3), std::invalid_argument);
}

TEST_CASE("A reader that takes one tensor twice gets both gradients", "[nn][graph]") {
  const ImageShape shape{2, 5, 5};
  Graph g;
  g.add(std::make_unique<Conv2d>("conv0", 2, 4, 3, 1, 1), {"input"});
  g.add(std::make_unique<Add>("twice", 2), {"conv0", "conv0"});
  g.add(std::make_unique<Flatten>("flatten"), {"twice"});
  g.add(std::make_unique<Linear>("fc", 4 * 5 * 5, 3), {"flatten"});
  Model m("twice", std::move(g), shape, 3);
  m.init(3);
  gradient_check(m, random_batch(shape, 4, 3, 6));
}

TEST_CASE("Graphs are Kahn-sorted with ties in insertion order and refuse bad edges", "[nn][graph]") {
  Graph g;  // written out of order: fc before what it reads
  g.add(std::make_unique<Linear>("fc", 8, 2), {"relu"});
  g.add(std::make_unique<Flatten>("flatten"), {"input"});
  g.add(std::make_unique<ReLU>("relu"), {"flatten"});
  g.finalize({1, 2, 2, 2});
  REQUIRE(g.size() == 3);
  CHECK(g.layer(0).name() == "flatten");
  CHECK(g.layer(1).name() == "relu");
  CHECK(g.layer(2).name() == "fc");
  CHECK(g.is_chain_link(0));
  CHECK(g.is_chain_link(2));
  CHECK(g.readers(Graph::output_of(0)).size() == 1);
  CHECK_FALSE(g.needs_grad(Graph::output_of(1)));  // nothing before fc has parameters
  CHECK(g.needs_grad(g.output()));

  Graph cycle;
  cycle.add(std::make_unique<ReLU>("a"), {"b"});
  cycle.add(std::make_unique<ReLU>("b"), {"a"});
  CHECK_THROWS_AS(cycle.finalize({1, 4}), std::invalid_argument);
  Graph unknown;
  unknown.add(std::make_unique<ReLU>("a"), {"nowhere"});
  CHECK_THROWS_AS(unknown.finalize({1, 4}), std::invalid_argument);
  Graph twice;
  twice.add(std::make_unique<ReLU>("a"), {"input"});
  twice.add(std::make_unique<ReLU>("a"), {"a"});
  CHECK_THROWS_AS(twice.finalize({1, 4}), std::invalid_argument);
  Graph arity;
  CHECK_THROWS_AS(arity.add(std::make_unique<Add>("add", 2), {"input"}), std::invalid_argument);
}

namespace {

// input -> conv0 = x; x -> conva [, x -> convb, ab = add(conva, convb)]; add(conva or ab, x)
// [-> relu] -> flatten -> fc: a residual block whose shortcut x has two (three) readers.
Graph residual(bool fused, bool three_readers) {
  Graph g;
  g.add(std::make_unique<Conv2d>("conv0", 2, 4, 3, 1, 1), {"input"});
  g.add(std::make_unique<Conv2d>("conva", 4, 4, 3, 1, 1), {"conv0"});
  if (three_readers) {
    g.add(std::make_unique<Conv2d>("convb", 4, 4, 1), {"conv0"});
    g.add(std::make_unique<Add>("ab", 2), {"conva", "convb"});
  }
  g.add(std::make_unique<Add>("add", 2, fused), {three_readers ? "ab" : "conva", "conv0"});
  g.add(std::make_unique<Flatten>("flatten"), {"add"});
  g.add(std::make_unique<Linear>("fc", 4 * 5 * 5, 3), {"flatten"});
  return g;
}

}  // namespace

TEST_CASE("A residual add's shortcut gradient is read from its other input's, not copied", "[nn][graph]") {
  const ImageShape shape{2, 5, 5};
  for (const bool three : {false, true}) {
    for (const bool fused : {false, true}) {
      Model m("residual", residual(fused, three), shape, 3);
      m.init(9);
      // The add's gradient goes to conva's (ab's) slot; x's first sum reads it from there.
      const PlanStats st = m.plan(4, Phase::kTrain).stats();
      CHECK(st.shared_gradients == 1);
      CHECK(st.gradient_sums == (three ? 2 : 1));
      // Without the ReLU the add's gradient is its diff_dst: its main slot is that memory
      // (ab, an add without ReLU itself, passes its own to conva or convb too).
      CHECK(st.passed_gradients == (fused ? 0 : 1) + (three ? 1 : 0));
      gradient_check(m, random_batch(shape, 4, 3, 10));
    }
  }
  // Where both slots read one tensor, or nothing else reads the shortcut, there is nothing to share.
  Model diamond_model("diamond", diamond(false, false), shape, 3);
  CHECK(diamond_model.plan(4, Phase::kTrain).stats().shared_gradients == 0);
  Graph g;
  g.add(std::make_unique<Conv2d>("conv0", 2, 4, 3, 1, 1), {"input"});
  g.add(std::make_unique<Add>("twice", 2), {"conv0", "conv0"});
  g.add(std::make_unique<Flatten>("flatten"), {"twice"});
  g.add(std::make_unique<Linear>("fc", 4 * 5 * 5, 3), {"flatten"});
  Model twice("twice", std::move(g), shape, 3);
  CHECK(twice.plan(4, Phase::kTrain).stats().shared_gradients == 0);
}
