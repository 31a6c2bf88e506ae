// The graph's training fusions (batch norm + ReLU through fuse_norm_relu, convolution + ReLU
// through an eltwise post-op) against the same models run unfused, and the plan's counts of
// fusions and reorders.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "model_harness.h"
#include "nn/Add.h"
#include "nn/BatchNorm2d.h"
#include "nn/Conv2d.h"
#include "nn/Flatten.h"
#include "nn/Graph.h"
#include "nn/GraphPlan.h"
#include "nn/Linear.h"
#include "nn/PlanReport.h"
#include "nn/ReLU.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

// conv1 -> relu1 (fusable); conv2 -> bn2 -> relu2 (fusable into bn2); conv3 read by relu3 and
// by add, so relu3 must stay a layer of its own; bn4 -> relu4 (fusable) whose output is read
// twice, by an add with its own ReLU.
Graph mixed() {
  Graph g;
  g.add(std::make_unique<Conv2d>("conv1", 3, 8, 3, 1, 1), {"input"});
  g.add(std::make_unique<ReLU>("relu1"), {"conv1"});
  g.add(std::make_unique<Conv2d>("conv2", Conv2d::Options{.in = 8, .out = 8, .kernel = 3, .pad = 1, .bias = false}),
        {"relu1"});
  g.add(std::make_unique<BatchNorm2d>("bn2", 8), {"conv2"});
  g.add(std::make_unique<ReLU>("relu2"), {"bn2"});
  g.add(std::make_unique<Conv2d>("conv3", 8, 8, 1), {"relu2"});
  g.add(std::make_unique<ReLU>("relu3"), {"conv3"});
  g.add(std::make_unique<Add>("add", 2), {"relu3", "conv3"});
  g.add(std::make_unique<BatchNorm2d>("bn4", 8), {"add"});
  g.add(std::make_unique<ReLU>("relu4"), {"bn4"});
  g.add(std::make_unique<Add>("twice", 2, true), {"relu4", "relu4"});
  g.add(std::make_unique<Flatten>("flatten"), {"twice"});
  g.add(std::make_unique<Linear>("fc", 8 * 6 * 6, 5), {"flatten"});
  return g;
}

struct Step {
  double loss = 0;
  std::vector<float> logits, grads, buffers, eval_logits;
};

// One training forward and backward, then an eval forward, from the same initial parameters.
Step run(Model& m, const Batch& b) {
  m.init(11);
  Step s;
  s.loss = mean_loss(m, b);
  s.logits.assign(m.logits().begin(), m.logits().end());
  m.backward();
  s.grads.assign(m.grads().begin(), m.grads().end());
  s.buffers.assign(m.buffers().begin(), m.buffers().end());
  mean_loss(m, b, Phase::kEval);
  s.eval_logits.assign(m.logits().begin(), m.logits().end());
  return s;
}

// Fused and unfused do the same float operations on the same values in the same order: the
// ReLU is max(y, 0) applied to the float y before it is stored (a monotone rounding cannot
// change its sign in bf16 either), and its backward passes diff_dst where y > 0, whether a
// separate eltwise reads dst > 0 or batch norm reads its workspace bit. So the results must be
// the same bits, not merely close.
void check_same_bits(Model& fused, Model& unfused, const Batch& b) {
  unfused.set_fusions(false);
  const Step f = run(fused, b), u = run(unfused, b);
  CHECK(f.loss == u.loss);
  CHECK(f.logits == u.logits);
  CHECK(f.grads == u.grads);
  CHECK(f.buffers == u.buffers);
  CHECK(f.eval_logits == u.eval_logits);
}

int count_fused(const Graph& g) {
  int n = 0;
  for (std::size_t i = 0; i < g.size(); ++i) n += g.fused_into(i) >= 0 ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("Fusions apply only where the ReLU alone reads a conv or batch norm", "[nn][graph][fusion]") {
  Model m("mixed", mixed(), {3, 6, 6}, 5);
  const Graph& g = m.graph();
  std::vector<int> into;
  for (std::size_t i = 0; i < g.size(); ++i) into.push_back(g.fused_into(i));
  // relu1 into conv1 (node 0), relu2 into bn2 (node 3), relu4 into bn4 (node 8); not relu3,
  // whose input conv3 is also read by add.
  CHECK(into == std::vector<int>{-1, 0, -1, -1, 3, -1, -1, -1, -1, 8, -1, -1, -1});
  CHECK(g.layer(0).relu_post_op());
  CHECK(g.layer(3).relu_post_op());
  CHECK_FALSE(g.layer(5).relu_post_op());
  m.set_fusions(false);
  CHECK(count_fused(g) == 0);
  for (std::size_t i = 0; i < g.size(); ++i) CHECK_FALSE(g.layer(i).relu_post_op());
  m.set_fusions(true);
  CHECK(count_fused(g) == 3);
}

TEST_CASE("Fused and unfused graphs give the same bits forward, backward and in eval", "[nn][graph][fusion]") {
  const ImageShape shape{3, 6, 6};
  Model fused("mixed", mixed(), shape, 5), unfused("mixed", mixed(), shape, 5);
  check_same_bits(fused, unfused, random_batch(shape, 4, 5, 21));
  // And the fused graph's gradient is the loss's: central differences.
  fused.init(5);
  gradient_check(fused, random_batch(shape, 4, 5, 22));
}

TEST_CASE("Zoo models: fused and unfused give the same bits", "[nn][graph][fusion]") {
  SECTION("resnet20 (batch norm + ReLU)") {
    const ImageShape shape{1, 28, 28};
    Model fused("resnet20", shape, 10), unfused("resnet20", shape, 10);
    CHECK(count_fused(fused.graph()) == 10);  // the stem's and each of 9 blocks' first BN
    check_same_bits(fused, unfused, random_batch(shape, 2, 10, 31));
  }
  SECTION("lenet5 (convolution + ReLU)") {
    const ImageShape shape{1, 28, 28};
    Model fused("lenet5", shape, 10), unfused("lenet5", shape, 10);
    CHECK(count_fused(fused.graph()) >= 2);
    check_same_bits(fused, unfused, random_batch(shape, 4, 10, 32));
  }
}

TEST_CASE("The plan counts its reorders and fusions", "[nn][graph][fusion]") {
  const ImageShape shape{1, 28, 28};
  Model m("resnet20", shape, 10);
  const std::string report = describe_plan(m, 4);
  INFO(report);
  CHECK(report.find("fused: 10 batch norm + ReLU, 0 convolution + ReLU, 9 add + ReLU") != std::string::npos);
  const PlanStats fused = m.plan(4, Phase::kTrain).stats();
  m.set_fusions(false);
  const PlanStats unfused = m.plan(4, Phase::kTrain).stats();
  // Fusion moves work, never layouts: the same reorders, and the fused ReLUs' outputs share
  // their producers' buffers (they did in place before too), so no more memory.
  CHECK(fused.forward_reorders == unfused.forward_reorders);
  CHECK(fused.backward_reorders == unfused.backward_reorders);
  CHECK(fused.layer_reorders == unfused.layer_reorders);
  CHECK(fused.separate_bytes <= unfused.separate_bytes);
  // Between layers only the flatten before the classifier may change layout (a blocked
  // pooled tensor into the plain inner product), once each way; the input is copied once.
  CHECK(fused.forward_reorders <= 1);
  CHECK(fused.backward_reorders <= 1);
  CHECK(fused.copies >= 1);
  // At most three per convolution (forward weights, backward-data weights, gradient back into
  // the plain arena); batch norm and the classifier's plain weights need none.
  int convs = 0;
  for (std::size_t i = 0; i < m.graph().size(); ++i) convs += m.graph().layer(i).kind() == "conv2d" ? 1 : 0;
  CHECK(convs == 21);
  CHECK(fused.weight_reorders <= 3 * convs);
  // An identity shortcut (the block's input, also read by its first convolution) reads the
  // add's gradient from the main branch's slot when its sum runs; projections have one reader.
  int identities = 0;
  for (std::size_t i = 0; i < m.graph().size(); ++i)
    for (const int v : m.graph().node(i).inputs)
      identities += m.graph().layer(i).kind() == "add" && m.graph().readers(v).size() > 1 ? 1 : 0;
  CHECK(identities == 7);
  CHECK(fused.shared_gradients == identities);
  CHECK(unfused.shared_gradients == identities);
  CHECK(report.find("9 gradient sums (7 reading an add's gradient where it lies, no copy)") != std::string::npos);
  // Separate buffers hold at least the 19 conv outputs of 16x28x28 .. 64x7x7 (batch 4, fp32);
  // the planned arena at least the largest value and its gradient, and less than them all.
  const std::size_t value = 4 * 16 * 28 * 28 * 4;
  CHECK(fused.separate_bytes >= 7 * value);
  CHECK(fused.planned_bytes >= 2 * value);
  CHECK(fused.planned_bytes < fused.separate_bytes);
}
