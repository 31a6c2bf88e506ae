// Reading a JSON Lines log (rank-<r>.jsonl) the way a run leaves it: a rank killed
// mid-write leaves its last line cut off, which is reported as a warning, not an error.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/Json.h"

namespace ringtrain {

// The records of `text` (the contents of `source`), one JSON value per non-empty line.
// A last line without its terminating newline that does not parse is skipped with a
// warning "<source>:<line>: ..." appended to `warnings`; any other bad line throws
// std::runtime_error "<source>:<line>: <parse error>".
std::vector<Json> parse_json_lines(std::string_view text, const std::string& source, std::vector<std::string>& warnings);

// Reads the file and parses it as above; throws naming the path if it cannot be read.
std::vector<Json> read_json_lines(const std::filesystem::path& path, std::vector<std::string>& warnings);

// Bytes of `text` up to and including its last newline: what is left of a log once a
// torn last line is cut away (used before appending to a log of an interrupted run).
std::size_t complete_lines_length(std::string_view text) noexcept;

}  // namespace ringtrain
