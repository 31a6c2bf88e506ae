// Config files through CLI11 2.1's TOML/INI reader. CLI11 reads a config file only for the
// top-level app, so for a subcommand's --config the items are applied here, option by
// option, the way CLI11 applies them itself (App::_parse_single_config); doing it here also
// lets every error name the file and the key.
#include "ConfigFile.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include <fmt/format.h>

namespace ringtrain {
namespace {

CLI::Option* find_option(CLI::App& sub, std::string key) {
  if (CLI::Option* op = sub.get_option_no_throw("--" + key)) return op;
  std::replace(key.begin(), key.end(), '_', '-');  // batch_size, as TOML files spell keys
  return sub.get_option_no_throw("--" + key);
}

// The value as TOML: bare when it is a number or a boolean, else a quoted string.
std::string toml_value(const std::string& v) {
  static const std::regex number(R"([-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)");
  if (v == "true" || v == "false" || std::regex_match(v, number)) return v;
  // CLI11's reader strips one pair of either quote without escapes: pick one v lacks.
  return v.find('"') == std::string::npos ? fmt::format("\"{}\"", v) : fmt::format("'{}'", v);
}

}  // namespace

void apply_config_file(CLI::App& sub, const std::string& path) {
  std::ifstream probe(path);
  if (!probe.good()) throw CLI::ConfigError(fmt::format("config file {}: cannot read it (missing?)", path));
  probe.close();
  if (std::filesystem::path(path).extension() == ".json") {
    // config.json is a run's resolved record (read by scripts), not options.
    throw CLI::ConfigError(fmt::format(
        "config file {}: JSON is not read; --config takes TOML/INI ('epochs = 5'), e.g. a run's own "
        "<run-dir>/config.toml",
        path));
  }
  CLI::ConfigTOML reader;  // reads INI too ('=' or ':' separators, [sections])
  std::vector<CLI::ConfigItem> items;
  try {
    items = reader.from_file(path);
  } catch (const CLI::ParseError& e) {
    throw CLI::ConfigError(fmt::format("config file {}: {}", path, e.what()));
  }
  for (const CLI::ConfigItem& item : items) {
    if (item.name == "++" || item.name == "--") continue;  // CLI11's section open/close markers
    const std::string key = item.fullname();
    const bool top_level = item.parents.empty() || (item.parents.size() == 1 && item.parents[0] == sub.get_name());
    CLI::Option* op = top_level ? find_option(sub, item.name) : nullptr;
    if (op == nullptr) {
      throw CLI::ConfigError(fmt::format("config file {}: unknown key '{}' (keys are the long options of "
                                         "'ringtrain {} --help' without the dashes)",
                                         path, key, sub.get_name()));
    }
    if (!op->get_configurable()) {
      throw CLI::ConfigError(fmt::format("config file {}: key '{}' cannot be set in a config file", path, key));
    }
    if (op->count() > 0) continue;  // given on the command line: it wins
    try {
      if (op->get_expected_min() == 0) {
        // A flag: 'augment = true'; for a negated flag ('no-normalize') CLI11 inverts it.
        op->add_result(op->get_flag_value(item.name, reader.to_flag(item)));
      } else {
        op->add_result(item.inputs);
      }
      op->run_callback();  // converts and validates now, so the error can name the key
    } catch (const CLI::ParseError& e) {
      throw CLI::ConfigError(fmt::format("config file {}: key '{}': {}", path, key, e.what()));
    }
  }
}

std::string config_file_text(const CLI::App& sub, const std::set<std::string>& commented_out) {
  std::string out;
  for (const CLI::Option* op : sub.get_options()) {
    const std::string key = op->get_single_name();
    if (!op->get_configurable() || op->get_lnames().empty() || key.empty()) continue;
    if (op == sub.get_help_ptr() || op == sub.get_help_all_ptr()) continue;
    std::string value;
    if (op->get_expected_min() == 0) {
      // A flag is on when its stored value is what giving it stores (for a negated flag,
      // "false"); written as 'key = true|false' it reads back to the same value.
      const bool on = op->count() > 0 && op->results().back() == op->get_flag_value(key, "true");
      value = on ? "true" : "false";
    } else if (op->count() > 0) {
      value = toml_value(op->results().back());
    } else if (!op->get_default_str().empty()) {
      value = toml_value(op->get_default_str());
    } else {
      continue;  // no value and no default text: leaving it out keeps the default
    }
    out += fmt::format("{}{} = {}\n", commented_out.count(key) > 0 ? "# " : "", key, value);
  }
  return out;
}

}  // namespace ringtrain
