// Merges a run directory's rank-<r>.jsonl logs into one Chrome trace (trace.json): one
// process per rank, the phases of each step as slices, CPU/RSS/network as counters. Opens
// in Perfetto (ui.perfetto.dev) and chrome://tracing.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/Json.h"

namespace ringtrain {

// The trace as JSON ({"traceEvents": [...], "displayTimeUnit": "ms"}). Throws
// std::runtime_error naming the file and line of an unreadable log; a log's truncated
// last line (a killed rank) is skipped with a message in `warnings` (JsonLines.h).
Json build_trace(const std::filesystem::path& run_dir, std::vector<std::string>& warnings);

// Writes <run_dir>/trace.json (or `out`), returns its path and the number of events.
std::pair<std::filesystem::path, std::size_t> write_trace(const std::filesystem::path& run_dir,
                                                          const std::filesystem::path& out,
                                                          std::vector<std::string>& warnings);

}  // namespace ringtrain
