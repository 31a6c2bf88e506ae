// RunLog on a full disk (/dev/full: every write fails with ENOSPC): each writer reports
// the file it failed on, and write_json leaves neither the target nor a .tmp behind.
// JSON Lines reading of a killed rank's log, and appending after it on resume.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "logs/JsonLines.h"
#include "logs/RunLog.h"

using namespace ringtrain;
using Catch::Matchers::Contains;

namespace {

std::filesystem::path fresh_dir(const char* name) {
  const auto dir = std::filesystem::temp_directory_path() / (std::string(name) + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("RunLog: a full disk under rank-<r>.jsonl is an error naming the file") {
  const auto dir = fresh_dir("ringtrain-runlog-full-rank");
  std::filesystem::create_symlink("/dev/full", dir / "rank-1.jsonl");
  RunLog log(dir, 1, /*is_root=*/false, /*append=*/false);
  Json rec = Json::object();
  rec.set("type", "step");
  // stdio buffers the record: the error shows at the latest when the buffer is flushed.
  CHECK_THROWS_WITH(
      [&] {
        for (int i = 0; i < 10000; ++i) log.record(rec);
        log.flush();
      }(),
      Contains((dir / "rank-1.jsonl").string()) && Contains("write failed") && Contains("No space left"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("RunLog: a full disk under metrics.csv fails at once, naming the file") {
  const auto dir = fresh_dir("ringtrain-runlog-full-metrics");
  std::filesystem::create_symlink("/dev/full", dir / "metrics.csv");
  // The header is flushed when the log opens, so the run fails before its first step.
  CHECK_THROWS_WITH(RunLog(dir, 0, /*is_root=*/true, /*append=*/false),
                    Contains((dir / "metrics.csv").string()) && Contains("No space left"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("RunLog::write_json on a full disk: error naming the .tmp, nothing left behind") {
  const auto dir = fresh_dir("ringtrain-runlog-full-json");
  RunLog log(dir, 0, /*is_root=*/true, /*append=*/false);
  std::ofstream(dir / "summary.json") << "{\"previous\": true}\n";
  std::filesystem::create_symlink("/dev/full", dir / "summary.json.tmp");
  Json j = Json::object();
  j.set("wall_s", 1.5);
  CHECK_THROWS_WITH(log.write_json("summary.json", j),
                    Contains((dir / "summary.json.tmp").string()) && Contains("No space left"));
  CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(dir / "summary.json.tmp")));
  std::ifstream in(dir / "summary.json");
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(kept == "{\"previous\": true}\n");
  // And a healthy write still lands.
  log.write_json("config.json", j);
  CHECK(std::filesystem::exists(dir / "config.json"));
  CHECK_FALSE(std::filesystem::exists(dir / "config.json.tmp"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("JSON Lines: a truncated last line is a warning, a bad line inside is an error") {
  std::vector<std::string> warnings;
  auto recs = parse_json_lines("{\"a\":1}\n{\"a\":2}\n{\"a\":", "rank-0.jsonl", warnings);
  CHECK(recs.size() == 2);
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Contains("rank-0.jsonl:3") && Contains("truncated last line"));

  warnings.clear();
  CHECK(parse_json_lines("{\"a\":1}\n\n{\"a\":2}", "r", warnings).size() == 2);  // complete without newline
  CHECK(warnings.empty());
  CHECK_THROWS_WITH(parse_json_lines("{\"a\":1}\n{\"a\":\n{\"a\":2}\n", "rank-3.jsonl", warnings),
                    Contains("rank-3.jsonl:2"));
  CHECK_THROWS_WITH(parse_json_lines("{\"a\":1}\n{oops}\n", "r.jsonl", warnings), Contains("r.jsonl:2"));
}

TEST_CASE("RunLog in append mode cuts a torn last line before appending, and says so") {
  const auto dir = fresh_dir("ringtrain-runlog-append");
  std::ofstream(dir / "rank-0.jsonl") << "{\"type\":\"step\",\"step\":1}\n{\"type\":\"st";
  {
    RunLog log(dir, 0, /*is_root=*/false, /*append=*/true);
    Json rec = Json::object();
    rec.set("type", "step");
    rec.set("step", 2);
    log.record(rec);
    log.flush();
  }
  std::vector<std::string> warnings;
  const auto recs = read_json_lines(dir / "rank-0.jsonl", warnings);
  CHECK(warnings.empty());
  REQUIRE(recs.size() == 3);
  CHECK(recs[0].at("step").as_int() == 1);
  CHECK(recs[1].at("type").as_string() == "event");
  CHECK_THAT(recs[1].at("message").as_string(), Contains("torn last line (11 bytes)"));
  CHECK(recs[2].at("step").as_int() == 2);
  std::filesystem::remove_all(dir);
}
