// Rank 0's console: a progress bar (epoch, step, loss, images/s, ETA) on stderr when it is a
// terminal, and one plain line per epoch on stdout; nothing with --quiet.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ringtrain {

class Progress {
 public:
  enum class Style { kAuto, kBar, kPlain };
  // enabled: false on ranks other than 0 and with --quiet. kAuto draws the bar when stderr
  // is a terminal; under mpirun a rank's stderr is a pipe whatever the user's terminal is,
  // so launchers that know (scripts/quickstart.sh) ask for kBar.
  Progress(bool enabled, int epochs, Style style = Style::kAuto);

  // "auto" | "bar" | "plain"; throws std::invalid_argument otherwise.
  static Style parse_style(const std::string& name);

  void begin_epoch(int epoch, std::int64_t steps);
  // Called every step; redraws at most ~10 times a second.
  void step(std::int64_t step, double loss, double images_per_s);
  // Ends the epoch's bar and prints its summary line.
  void end_epoch(const std::string& line);
  // A line outside the bar (notes, warnings, the final summary).
  void note(const std::string& line);

 private:
  bool enabled_;
  bool tty_;
  int epochs_;
  int epoch_ = 0;
  std::int64_t steps_ = 0;
  std::chrono::steady_clock::time_point epoch_start_;
  std::chrono::steady_clock::time_point last_draw_;
  bool drawn_ = false;
};

}  // namespace ringtrain
