// Chrome trace event format: "X" complete events (ts, dur in microseconds), "C" counters,
// "M" metadata for process names.
#include "trace/Trace.h"

#include "logs/JsonLines.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace ringtrain {
namespace {

// Rows (tids) of a rank: what the compute thread did, and the communication thread's
// operations, which overlap backward.
constexpr int kComputeRow = 0;
constexpr int kCommRow = 1;

Json slice(const std::string& name, int rank, double start_s, double dur_s, Json args = Json(), int row = kComputeRow) {
  Json e = Json::object();
  e.set("name", name);
  e.set("cat", row == kCommRow ? "communication" : "phase");
  e.set("ph", "X");
  e.set("pid", rank);
  e.set("tid", row);
  e.set("ts", start_s * 1e6);
  e.set("dur", std::max(dur_s, 0.0) * 1e6);
  if (!args.is_null()) e.set("args", std::move(args));
  return e;
}

Json counter(const std::string& name, int rank, double t_s, Json args) {
  Json e = Json::object();
  e.set("name", name);
  e.set("ph", "C");
  e.set("pid", rank);
  e.set("ts", t_s * 1e6);
  e.set("args", std::move(args));
  return e;
}

double number_or_zero(const Json& obj, std::string_view key) {
  const Json* v = obj.find(key);
  return v != nullptr && v->is_number() ? v->as_double() : 0.0;
}

// The run's rank logs, by rank.
std::vector<std::pair<int, std::filesystem::path>> rank_logs(const std::filesystem::path& run_dir) {
  if (!std::filesystem::is_directory(run_dir)) {
    throw std::runtime_error(fmt::format("{}: not a run directory", run_dir.string()));
  }
  std::vector<std::pair<int, std::filesystem::path>> logs;
  const std::regex pattern(R"(rank-(\d+)\.jsonl)");
  for (const auto& entry : std::filesystem::directory_iterator(run_dir)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, m, pattern) && m[1].length() <= 9) logs.emplace_back(std::stoi(m[1].str()), entry.path());
  }
  if (logs.empty()) {
    throw std::runtime_error(fmt::format("{}: no rank-<r>.jsonl logs (expected a ringtrain run directory)",
                                         run_dir.string()));
  }
  std::sort(logs.begin(), logs.end());
  return logs;
}

Json name_event(const char* what, int rank, std::optional<int> row, const std::string& name) {
  Json e = Json::object();
  e.set("name", what);
  e.set("ph", "M");
  e.set("pid", rank);
  if (row) e.set("tid", *row);
  e.set("args", Json(Json::Object{{"name", name}}));
  return e;
}

// A step record: t is the end of the step(s); the compute thread's phases ran back to back
// before it. Its communication phase is the wait for the all-reduce after backward (the
// exposed part); logs from before overlap have only allreduce_s.
void step_phases(const Json& rec, int rank, double t, Json& events) {
  const bool has_exposed = rec.find("exposed_comm_s") != nullptr;
  const std::pair<const char*, const char*> kPhases[] = {
      {"data", "data_s"},
      {"forward", "forward_s"},
      {"backward", "backward_s"},
      has_exposed ? std::pair{"all-reduce wait", "exposed_comm_s"} : std::pair{"all-reduce", "allreduce_s"},
      {"optimizer", "optimizer_s"},
      {"checkpoint", "checkpoint_s"}};
  double total = 0.0;
  for (const auto& [name, key] : kPhases) total += number_or_zero(rec, key);
  double start = t - total;
  for (const auto& [name, key] : kPhases) {
    const double d = number_or_zero(rec, key);
    if (d <= 0.0) continue;
    Json args = Json::object();
    args.set("step", number_or_zero(rec, "step"));
    args.set("steps", number_or_zero(rec, "steps"));
    if (std::string_view(key) == "exposed_comm_s" || std::string_view(key) == "allreduce_s") {
      args.set("allreduce_s", number_or_zero(rec, "allreduce_s"));
      args.set("wait_s", number_or_zero(rec, "wait_s"));
    }
    events.push(slice(name, rank, start, d, std::move(args)));
    start += d;
  }
}

// The last step's operations on the communication row: the loss/stop agreement, then one
// slice per bucket, as (start, end) seconds before t.
void step_communication(const Json& rec, int rank, double t, Json& events) {
  const Json* ops = rec.find("comm_slices");
  if (ops == nullptr || !ops->is_array()) return;
  const auto& list = ops->as_array();
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_array() || list[i].as_array().size() != 2) continue;
    const double a = list[i].as_array()[0].as_double();
    const double b = list[i].as_array()[1].as_double();
    Json args = Json::object();
    args.set("step", number_or_zero(rec, "step"));
    if (i > 0) args.set("bucket", static_cast<std::int64_t>(i - 1));
    events.push(slice(i == 0 ? "agreement" : "all-reduce", rank, t + a, b - a, std::move(args), kCommRow));
  }
}

void resource_counters(const Json& rec, int rank, double t, Json& events) {
  events.push(counter("CPU", rank, t, Json(Json::Object{{"cpu %", number_or_zero(rec, "cpu_percent")}})));
  events.push(counter("memory", rank, t, Json(Json::Object{{"RSS MB", number_or_zero(rec, "rss_mb")}})));
  events.push(counter("network", rank, t,
                      Json(Json::Object{{"send MB/s", number_or_zero(rec, "net_send_mbps")},
                                        {"recv MB/s", number_or_zero(rec, "net_recv_mbps")}})));
}

void rank_events(int rank, const std::filesystem::path& path, Json& events, std::vector<std::string>& warnings) {
  events.push(name_event("process_name", rank, std::nullopt, fmt::format("rank {}", rank)));
  events.push(name_event("thread_name", rank, kComputeRow, "compute"));
  events.push(name_event("thread_name", rank, kCommRow, "communication"));
  for (const Json& rec : read_json_lines(path, warnings)) {
    if (!rec.is_object()) continue;
    const Json* type = rec.find("type");
    if (type == nullptr || !type->is_string()) continue;
    const double t = number_or_zero(rec, "t");
    const std::string& kind = type->as_string();
    if (kind == "step") {
      step_phases(rec, rank, t, events);
      step_communication(rec, rank, t, events);
    } else if (kind == "eval" || kind == "checkpoint") {
      const double d = number_or_zero(rec, "seconds");
      events.push(slice(kind, rank, t - d, d, rec));
    } else if (kind == "resource") {
      resource_counters(rec, rank, t, events);
    }
  }
}

}  // namespace

Json build_trace(const std::filesystem::path& run_dir, std::vector<std::string>& warnings) {
  Json events = Json::array();
  for (const auto& [rank, path] : rank_logs(run_dir)) rank_events(rank, path, events, warnings);
  Json trace = Json::object();
  trace.set("traceEvents", std::move(events));
  trace.set("displayTimeUnit", "ms");
  return trace;
}

std::pair<std::filesystem::path, std::size_t> write_trace(const std::filesystem::path& run_dir,
                                                          const std::filesystem::path& out,
                                                          std::vector<std::string>& warnings) {
  const Json trace = build_trace(run_dir, warnings);
  const std::filesystem::path path = out.empty() ? run_dir / "trace.json" : out;
  std::ofstream f(path);
  if (!f) throw std::runtime_error(fmt::format("{}: cannot open for writing", path.string()));
  f << trace.dump() << '\n';
  f.close();  // close() reaches the file: its errors count too
  if (!f) throw std::runtime_error(fmt::format("{}: write failed", path.string()));
  return {path, trace.at("traceEvents").as_array().size()};
}

}  // namespace ringtrain
