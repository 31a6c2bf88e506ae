// ringtrain: the command line. Parses into config structs and calls src/; errors end every
// rank (MPI_Abort) or, when every rank raised the same error, exit cleanly on all of them.
// Exit codes: 0 ok, 1 runtime error, 2 usage, 75 train stopped by a signal after its checkpoint
// (kExitStopped, StopSignals.h).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "Commands.h"
#include "collectives/MpiEnvironment.h"
#include "run/StopSignals.h"
#include "train/Trainer.h"

namespace {

int g_rank = -1;
int g_world_size = 0;

void print_error(const std::string& message) {
  if (g_rank >= 0) {
    fmt::print(stderr, "ringtrain: [rank {}] error: {}\n", g_rank, message);
  } else {
    fmt::print(stderr, "ringtrain: error: {}\n", message);
  }
  std::fflush(stderr);
}

// The first word that is not an option names the command (the top level has only
// value-less flags): name it when it is unknown, where CLI11 would only say that a
// subcommand is required. Returns false after printing the usage error.
bool command_known(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.starts_with("-")) continue;
    std::vector<std::string> known;
    for (const CLI::App* sub : app.get_subcommands({})) known.push_back(sub->get_name());
    if (std::find(known.begin(), known.end(), word) != known.end()) return true;
    fmt::print(stderr, "ringtrain: usage error: unknown command '{}' (commands: {})\n", word, fmt::join(known, ", "));
    return false;
  }
  return true;
}

// Parses the command line (and train --config's file). Returns the exit code when the
// process is done here: help, version, or a usage error (2).
std::optional<int> parse(CLI::App& app, ringtrain::Commands& commands, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    commands.apply_config_file();
  } catch (const CLI::ConfigError& e) {
    // Already names the file and the key: one line.
    fmt::print(stderr, "ringtrain: usage error: {}\n", e.what());
    return 2;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "ringtrain: usage error: {}\nRun 'ringtrain --help' or 'ringtrain <command> --help'.\n",
               e.what());
    return 2;
  }
  return std::nullopt;
}

int run_local(ringtrain::Commands& commands) {
  try {
    return commands.run_local();
  } catch (const std::invalid_argument& e) {
    print_error(e.what());
    return 2;
  } catch (const std::exception& e) {
    print_error(e.what());
    return 1;
  }
}

// Commands that may run under mpirun.
int run_distributed(ringtrain::Commands& commands, int argc, char** argv) {
  using namespace ringtrain;
  std::unique_ptr<MpiEnvironment> env;
  try {
    // Before MPI_Init starts any thread: training takes SIGTERM/SIGINT in a thread of its
    // own and stops after the step with a checkpoint (StopSignals.h says why no handler).
    if (commands.stops_on_signal()) take_stop_signals_in_thread();
    env = std::make_unique<MpiEnvironment>(argc, argv);
  } catch (const std::exception& e) {
    print_error(e.what());
    return 1;
  }
  int code = 0;
  try {
    auto comm = env->world();
    g_rank = comm->rank();
    g_world_size = comm->size();
    code = commands.run_distributed(*comm);
  } catch (const CollectiveError& e) {
    // Every rank raised it at the same point: report everywhere, leave together.
    print_error(e.what());
    code = e.exit_code();
  } catch (const std::invalid_argument& e) {
    print_error(e.what());
    // Alone, there is no peer to release: finalize and exit normally.
    if (g_world_size != 1) MpiEnvironment::abort(2);
    code = 2;
  } catch (const std::exception& e) {
    print_error(e.what());
    if (g_world_size != 1) MpiEnvironment::abort(1);
    code = 1;
  }
  env.reset();
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringtrain: data-parallel CNN training with a ring all-reduce over MPI, on oneDNN", "ringtrain"};
  app.require_subcommand(1);
  // A flag given twice takes its last value, as in argparse: scripts append overrides.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_version_flag("--version", std::string("ringtrain ") + RINGTRAIN_VERSION);
  ringtrain::Commands commands(app);
  if (!command_known(app, argc, argv)) return 2;
  if (const std::optional<int> done = parse(app, commands, argc, argv)) return *done;
  return commands.needs_mpi() ? run_distributed(commands, argc, argv) : run_local(commands);
}
