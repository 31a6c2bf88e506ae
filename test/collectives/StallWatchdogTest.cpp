// The stall watchdog on the process-wide StallRecord, without MPI: a wait longer than the
// warning gives exactly one warning naming step, bucket, operation and peer; a wait past the
// timeout gives the fatal message naming the stalled rank; short waits and finished waits
// give nothing. Thresholds are tenths of a second and every check allows seconds of slack,
// so a loaded machine delays these tests but cannot fail them.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectives/StallWatchdog.h"

using namespace ringtrain;
using Catch::Matchers::Contains;

namespace {

struct Collected {
  std::mutex mutex;
  std::vector<std::string> warnings;
  std::vector<std::string> fatals;
  std::size_t count(bool fatal) {
    std::lock_guard<std::mutex> lock(mutex);
    return fatal ? fatals.size() : warnings.size();
  }
};

// Polls until pred() or `limit` passes; true if pred() held.
template <class Pred>
bool eventually(Pred pred, std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

}  // namespace

TEST_CASE("StallWatchdog warns once per stall, naming step, bucket, operation and peer", "[stall]") {
  Collected got;
  StallOptions options;
  options.warning_s = 0.2;
  options.timeout_s = 0.0;  // never fatal here
  options.poll_s = 0.02;
  StallWatchdog watchdog(
      options, [&](const std::string& m) { std::lock_guard<std::mutex> lock(got.mutex); got.warnings.push_back(m); },
      [&](const std::string& m) { std::lock_guard<std::mutex> lock(got.mutex); got.fatals.push_back(m); });
  auto& record = StallRecord::instance();
  record.set_step(17);
  record.set_bucket(2, 5);
  record.set_operation("ring all-reduce");
  record.begin_wait("receive", 3, std::chrono::steady_clock::now());
  REQUIRE(eventually([&] { return got.count(false) >= 1; }));
  // The same stall, still going: no second warning.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  record.end_wait();
  {
    std::lock_guard<std::mutex> lock(got.mutex);
    REQUIRE(got.warnings.size() == 1);
    CHECK_THAT(got.warnings[0], Contains("step 17") && Contains("bucket 3 of 5") && Contains("ring all-reduce") &&
                                    Contains("(receive)") && Contains("waiting for rank 3"));
    CHECK(got.fatals.empty());
  }
  // A new stall warns again; a wait shorter than the threshold never does.
  record.set_bucket(-1, 5);
  record.set_operation("all-reduce of metrics");
  record.begin_wait("MPI_Allreduce", StallRecord::kAllRanks, std::chrono::steady_clock::now());
  REQUIRE(eventually([&] { return got.count(false) >= 2; }));
  record.end_wait();
  {
    std::lock_guard<std::mutex> lock(got.mutex);
    CHECK_THAT(got.warnings[1], Contains("all-reduce of metrics") && Contains("waiting for every rank"));
    CHECK_THAT(got.warnings[1], !Contains("bucket"));
  }
  for (int i = 0; i < 5; ++i) {
    record.begin_wait("receive", 1, std::chrono::steady_clock::now());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    record.end_wait();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(got.count(false) == 2);
  record.set_step(0);
  record.set_bucket(-1, 0);
}

TEST_CASE("StallWatchdog's timeout hands over one fatal message naming the stalled rank", "[stall]") {
  Collected got;
  StallOptions options;
  options.warning_s = 0.1;
  options.timeout_s = 0.4;
  options.poll_s = 0.02;
  StallWatchdog watchdog(
      options, [&](const std::string& m) { std::lock_guard<std::mutex> lock(got.mutex); got.warnings.push_back(m); },
      [&](const std::string& m) { std::lock_guard<std::mutex> lock(got.mutex); got.fatals.push_back(m); });
  auto& record = StallRecord::instance();
  record.set_operation("ps all-reduce");
  record.begin_wait("send", 0, std::chrono::steady_clock::now());
  REQUIRE(eventually([&] { return got.count(true) >= 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  record.end_wait();
  std::lock_guard<std::mutex> lock(got.mutex);
  CHECK(got.fatals.size() == 1);  // the thread stops watching after the fatal message
  CHECK(got.warnings.size() == 1);
  CHECK_THAT(got.fatals[0], Contains("stall timeout") && Contains("ps all-reduce") && Contains("stalled rank(s): rank 0 (stopped") &&
                                Contains("--stall-timeout 0.4"));
}

TEST_CASE("Stall options are validated and 0/0 starts no thread", "[stall]") {
  StallOptions bad;
  bad.warning_s = -1;
  CHECK_THROWS_WITH(validate_stall_options(bad), Contains("--stall-warning"));
  bad.warning_s = 1;
  bad.timeout_s = std::nan("");
  CHECK_THROWS_WITH(validate_stall_options(bad), Contains("--stall-timeout"));
  StallOptions off;
  off.warning_s = 0;
  off.timeout_s = 0;
  int calls = 0;
  {
    StallWatchdog watchdog(off, [&](const std::string&) { ++calls; }, [&](const std::string&) { ++calls; });
    StallRecord::instance().begin_wait("receive", 1, std::chrono::steady_clock::now() - std::chrono::hours(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    StallRecord::instance().end_wait();
  }
  CHECK(calls == 0);
}
