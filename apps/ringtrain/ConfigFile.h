// `ringtrain train --config FILE`: a TOML/INI file of the subcommand's options, read with
// CLI11's parser, and the reverse, the options of a parsed command as such a file
// (<run-dir>/config.toml).
#pragma once

#include <set>
#include <string>

#include <CLI/CLI.hpp>

namespace ringtrain {

// Applies path's keys (long option names, '-' or '_') to sub's options that the command
// line left unset, so flags given on the command line win. Keys may also sit in a
// [<sub name>] section. Throws CLI::ConfigError, one line naming the file and the key, for
// a missing file, an unknown or non-configurable key, or a value the option rejects.
void apply_config_file(CLI::App& sub, const std::string& path);

// sub's configurable options with their values (given, from a file, or default) as a
// TOML file that apply_config_file() reads back to the same values. Keys in commented_out
// are written as comments: values of this run that must not carry over into a rerun.
std::string config_file_text(const CLI::App& sub, const std::set<std::string>& commented_out);

}  // namespace ringtrain
