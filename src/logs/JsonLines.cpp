// JSON Lines reading with the one tolerance a killed writer needs: a torn last line.
#include "logs/JsonLines.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {

std::vector<Json> parse_json_lines(std::string_view text, const std::string& source, std::vector<std::string>& warnings) {
  std::vector<Json> records;
  std::size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    const std::size_t end = text.find('\n', pos);
    const bool terminated = end != std::string_view::npos;
    const std::string_view line = text.substr(pos, (terminated ? end : text.size()) - pos);
    pos = terminated ? end + 1 : text.size();
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    try {
      records.push_back(Json::parse(line));
    } catch (const std::exception& e) {
      if (terminated) throw std::runtime_error(fmt::format("{}:{}: {}", source, line_no, e.what()));
      // The writer was stopped inside its last record (SIGKILL, a node failure).
      warnings.push_back(fmt::format("{}:{}: ignoring the truncated last line ({} bytes, no newline): the run was cut "
                                     "off mid-write",
                                     source, line_no, line.size()));
    }
  }
  return records;
}

std::vector<Json> read_json_lines(const std::filesystem::path& path, std::vector<std::string>& warnings) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw std::runtime_error(fmt::format("{}: read failed", path.string()));
  return parse_json_lines(text.str(), path.string(), warnings);
}

std::size_t complete_lines_length(std::string_view text) noexcept {
  const std::size_t last = text.rfind('\n');
  return last == std::string_view::npos ? 0 : last + 1;
}

}  // namespace ringtrain
