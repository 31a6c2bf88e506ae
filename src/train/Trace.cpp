// Chrome trace event format: "X" complete events (ts, dur in microseconds), "C" counters,
// "M" metadata for process names.
#include "train/Trace.h"

#include "train/JsonLines.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace ringtrain {
namespace {

Json slice(const std::string& name, int rank, double start_s, double dur_s, Json args = Json()) {
  Json e = Json::object();
  e.set("name", name);
  e.set("cat", "phase");
  e.set("ph", "X");
  e.set("pid", rank);
  e.set("tid", 0);
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

}  // namespace

Json build_trace(const std::filesystem::path& run_dir, std::vector<std::string>& warnings) {
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

  Json events = Json::array();
  for (const auto& [rank, path] : logs) {
    Json meta = Json::object();
    meta.set("name", "process_name");
    meta.set("ph", "M");
    meta.set("pid", rank);
    Json args = Json::object();
    args.set("name", fmt::format("rank {}", rank));
    meta.set("args", std::move(args));
    events.push(std::move(meta));

    for (const Json& rec : read_json_lines(path, warnings)) {
      if (!rec.is_object()) continue;
      const Json* type = rec.find("type");
      if (type == nullptr || !type->is_string()) continue;
      const double t = number_or_zero(rec, "t");
      const std::string& kind = type->as_string();
      if (kind == "step") {
        // t is the end of the step(s); phases ran back to back before it.
        static constexpr std::pair<const char*, const char*> kPhases[] = {
            {"data", "data_s"},           {"forward", "forward_s"},     {"backward", "backward_s"},
            {"all-reduce", "allreduce_s"}, {"optimizer", "optimizer_s"}, {"checkpoint", "checkpoint_s"}};
        double total = 0.0;
        for (const auto& [name, key] : kPhases) total += number_or_zero(rec, key);
        double start = t - total;
        for (const auto& [name, key] : kPhases) {
          const double d = number_or_zero(rec, key);
          if (d <= 0.0) continue;
          Json args = Json::object();
          args.set("step", number_or_zero(rec, "step"));
          args.set("steps", number_or_zero(rec, "steps"));
          if (std::string_view(name) == "all-reduce") args.set("wait_s", number_or_zero(rec, "wait_s"));
          events.push(slice(name, rank, start, d, std::move(args)));
          start += d;
        }
      } else if (kind == "eval" || kind == "checkpoint") {
        const double d = number_or_zero(rec, "seconds");
        events.push(slice(kind, rank, t - d, d, rec));
      } else if (kind == "resource") {
        Json cpu = Json::object();
        cpu.set("cpu %", number_or_zero(rec, "cpu_percent"));
        events.push(counter("CPU", rank, t, std::move(cpu)));
        Json mem = Json::object();
        mem.set("RSS MB", number_or_zero(rec, "rss_mb"));
        events.push(counter("memory", rank, t, std::move(mem)));
        Json net = Json::object();
        net.set("send MB/s", number_or_zero(rec, "net_send_mbps"));
        net.set("recv MB/s", number_or_zero(rec, "net_recv_mbps"));
        events.push(counter("network", rank, t, std::move(net)));
      }
    }
  }
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
