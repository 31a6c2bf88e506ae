// LR schedules at and around their boundaries (warmup end, step boundaries, milestones,
// cosine start/midpoint/end), the linear scaling rule and the milestone parser.
#include <cmath>
#include <limits>
#include <numbers>

#include <catch2/catch.hpp>

#include "optim/LrSchedule.h"

namespace ringtrain {
namespace {

using Catch::Matchers::Contains;

LrScheduleConfig config(const std::string& name, double base_lr) {
  LrScheduleConfig c;
  c.name = name;
  c.base_lr = base_lr;
  return c;
}

TEST_CASE("constant schedule", "[optim][lr]") {
  const LrSchedule s(config("constant", 0.05));
  CHECK(s.lr(0) == 0.05);
  CHECK(s.lr(7.25) == 0.05);
  CHECK(s.lr(1000) == 0.05);
}

TEST_CASE("step schedule multiplies by gamma every step_epochs", "[optim][lr]") {
  auto c = config("step", 0.1);
  c.gamma = 0.1;
  c.step_epochs = 30;
  const LrSchedule s(c);
  CHECK(s.lr(0) == Approx(0.1));
  CHECK(s.lr(29.999) == Approx(0.1));
  CHECK(s.lr(fractional_epoch(30, 0, 391)) == Approx(0.01));
  CHECK(s.lr(59.99) == Approx(0.01));
  CHECK(s.lr(60) == Approx(0.001));
  CHECK(s.lr(95) == Approx(1e-4));

  // 0 + 3 / 10 = 0.3 and 0.3 / 0.1 = 2.9999999999999996 in double: the boundary at
  // 0.3 must still count as reached at that step.
  c.step_epochs = 0.1;
  c.gamma = 0.5;
  const LrSchedule fine(c);
  CHECK(fine.lr(fractional_epoch(0, 3, 10)) == Approx(0.1 * 0.125));
  CHECK(fine.lr(fractional_epoch(0, 2, 10)) == Approx(0.1 * 0.25));
}

TEST_CASE("multistep schedule: the 40-epoch 1e-2 / 1e-3 / 1e-4 run", "[optim][lr]") {
  auto c = config("multistep", 1e-2);
  c.milestones = {10, 20};
  c.gamma = 0.1;
  const LrSchedule s(c);
  CHECK(s.lr(0) == Approx(1e-2));
  CHECK(s.lr(fractional_epoch(9, 99, 100)) == Approx(1e-2));
  CHECK(s.lr(fractional_epoch(10, 0, 100)) == Approx(1e-3));
  CHECK(s.lr(19.5) == Approx(1e-3));
  CHECK(s.lr(20) == Approx(1e-4));
  CHECK(s.lr(fractional_epoch(39, 99, 100)) == Approx(1e-4));
}

TEST_CASE("cosine schedule: start, quarter, midpoint, end and beyond", "[optim][lr]") {
  auto c = config("cosine", 0.1);
  c.min_lr = 0.001;
  c.total_epochs = 10;
  const LrSchedule s(c);
  CHECK(s.lr(0) == Approx(0.1));
  CHECK(s.lr(2.5) == Approx(0.001 + 0.099 * (1 + std::sqrt(0.5)) / 2));  // cos(pi/4)
  CHECK(s.lr(5) == Approx(0.0505));  // midpoint: (base + min) / 2
  CHECK(s.lr(9.999) == Approx(0.001).epsilon(1e-3));
  CHECK(s.lr(10) == 0.001);
  CHECK(s.lr(12) == 0.001);
}

TEST_CASE("linear warmup rises to the schedule's lr at warmup_epochs", "[optim][lr]") {
  SECTION("from zero (the default)") {
    auto c = config("constant", 0.4);
    c.warmup_epochs = 5;
    const LrSchedule s(c);
    CHECK(s.lr(0) == 0.0);
    CHECK(s.lr(1) == Approx(0.08));
    CHECK(s.lr(2.5) == Approx(0.2));
    CHECK(s.lr(4.999) == Approx(0.4 * 4.999 / 5));
    CHECK(s.lr(5) == Approx(0.4));
    CHECK(s.lr(6) == Approx(0.4));
  }
  SECTION("from 1/k as Goyal et al.: k = 4, base 0.1 scaled to 0.4") {
    auto c = config("constant", scale_lr_linear(0.1, 1024, 256));
    c.warmup_epochs = 5;
    c.warmup_start_factor = 256.0 / 1024.0;
    const LrSchedule s(c);
    CHECK(s.lr(0) == Approx(0.1));
    CHECK(s.lr(2.5) == Approx(0.25));
    CHECK(s.lr(5) == Approx(0.4));
  }
  SECTION("before multistep milestones") {
    auto c = config("multistep", 0.2);
    c.milestones = {10, 20};
    c.warmup_epochs = 2;
    const LrSchedule s(c);
    CHECK(s.lr(1) == Approx(0.1));
    CHECK(s.lr(2) == Approx(0.2));
    CHECK(s.lr(9.9) == Approx(0.2));
    CHECK(s.lr(10) == Approx(0.02));
  }
  SECTION("before cosine: the target is the cosine value at warmup end") {
    auto c = config("cosine", 0.1);
    c.total_epochs = 10;
    c.warmup_epochs = 2;
    const LrSchedule s(c);
    const double at_w = 0.05 * (1 + std::cos(std::numbers::pi / 5));
    CHECK(s.lr(1) == Approx(at_w / 2));
    CHECK(s.lr(1.999999) == Approx(at_w).epsilon(1e-5));
    CHECK(s.lr(2) == Approx(at_w));
    CHECK(s.lr(3) == Approx(0.05 * (1 + std::cos(0.3 * std::numbers::pi))));
    CHECK(s.lr(10) == 0.0);
  }
}

TEST_CASE("lr schedule validation names the bad option", "[optim][lr]") {
  auto c = config("exponential", 0.1);
  REQUIRE_THROWS_WITH(LrSchedule(c), Contains("unknown lr schedule \"exponential\"") &&
                                         Contains("constant, step, multistep, cosine"));
  c = config("constant", -0.1);
  REQUIRE_THROWS_WITH(LrSchedule(c), Contains("base_lr"));
  c = config("constant", 0.1);
  c.warmup_epochs = -1;
  REQUIRE_THROWS_WITH(LrSchedule(c), Contains("warmup_epochs"));
  c = config("constant", 0.1);
  c.warmup_start_factor = 1.5;
  REQUIRE_THROWS_WITH(LrSchedule(c), Contains("warmup_start_factor"));
  c = config("step", 0.1);
  c.step_epochs = 0;
  REQUIRE_THROWS_WITH(LrSchedule(c), Contains("step_epochs"));
  c = config("step", 0.1);
  c.gamma = 0;
  REQUIRE_THROWS_WITH(LrSchedule(c), Contains("gamma"));
  c = config("multistep", 0.1);
  REQUIRE_THROWS_WITH(LrSchedule(c), Contains("at least one milestone"));
  c.milestones = {20, 10};
  REQUIRE_THROWS_WITH(LrSchedule(c), Contains("milestones must increase"));
  c = config("cosine", 0.1);
  c.min_lr = 0.2;
  REQUIRE_THROWS_WITH(LrSchedule(c), Contains("min_lr"));
  c = config("cosine", 0.1);
  c.total_epochs = 0;
  REQUIRE_THROWS_WITH(LrSchedule(c), Contains("total_epochs"));
  c = config("cosine", 0.1);
  c.total_epochs = 5;
  c.warmup_epochs = 5;
  REQUIRE_THROWS_WITH(LrSchedule(c), Contains("warmup_epochs (5) must be < total_epochs (5)"));

  const LrSchedule s(config("constant", 0.1));
  REQUIRE_THROWS_WITH(s.lr(-0.5), Contains("epoch"));
  REQUIRE_THROWS_AS(s.lr(std::numeric_limits<double>::quiet_NaN()), std::invalid_argument);
}

TEST_CASE("scale_lr_linear and fractional_epoch", "[optim][lr]") {
  CHECK(scale_lr_linear(0.1, 8192, 256) == Approx(3.2));
  CHECK(scale_lr_linear(0.1, 256, 256) == 0.1);
  CHECK(scale_lr_linear(0.1, 64, 256) == Approx(0.025));
  REQUIRE_THROWS_WITH(scale_lr_linear(0.1, 0, 256), Contains("batch sizes"));
  REQUIRE_THROWS_WITH(scale_lr_linear(0.1, 256, -1), Contains("batch sizes"));
  REQUIRE_THROWS_WITH(scale_lr_linear(-0.1, 256, 256), Contains("base_lr"));
  CHECK(fractional_epoch(2, 50, 100) == 2.5);
  CHECK(fractional_epoch(0, 0, 1) == 0.0);
  REQUIRE_THROWS_AS(fractional_epoch(0, 0, 0), std::invalid_argument);
  REQUIRE_THROWS_AS(fractional_epoch(-1, 0, 10), std::invalid_argument);
}

TEST_CASE("parse_milestones", "[optim][lr]") {
  CHECK(parse_milestones("10,20") == std::vector<double>{10, 20});
  CHECK(parse_milestones(" 30, 60 ,80 ") == std::vector<double>{30, 60, 80});
  CHECK(parse_milestones("2.5") == std::vector<double>{2.5});
  CHECK(parse_milestones("").empty());
  CHECK(parse_milestones("  ").empty());
  REQUIRE_THROWS_WITH(parse_milestones("10,,20"), Contains("item 2 is empty"));
  REQUIRE_THROWS_WITH(parse_milestones("10,"), Contains("item 2 is empty"));
  REQUIRE_THROWS_WITH(parse_milestones("10,x"), Contains("item 2 (\"x\") is not a number"));
  REQUIRE_THROWS_WITH(parse_milestones("10 20"), Contains("is not a number"));
  REQUIRE_THROWS_WITH(parse_milestones("10,5"),
                      Contains("item 2 (5) must be greater than the one before (10)"));
  REQUIRE_THROWS_WITH(parse_milestones("10,10"), Contains("greater"));
  REQUIRE_THROWS_WITH(parse_milestones("-1"), Contains("item 1"));
  // The parsed list feeds the schedule directly.
  auto c = config("multistep", 1e-2);
  c.milestones = parse_milestones("10,20");
  CHECK(LrSchedule(c).lr(15) == Approx(1e-3));
}

}  // namespace
}  // namespace ringtrain
