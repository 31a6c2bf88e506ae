// Console progress output.
#include "logs/Progress.h"

#include <unistd.h>

#include <cstdio>
#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {

Progress::Progress(bool enabled, int epochs, Style style)
    : enabled_(enabled),
      tty_(style == Style::kBar || (style == Style::kAuto && ::isatty(STDERR_FILENO) == 1)),
      epochs_(epochs) {}

Progress::Style Progress::parse_style(const std::string& name) {
  if (name == "auto") return Style::kAuto;
  if (name == "bar") return Style::kBar;
  if (name == "plain") return Style::kPlain;
  throw std::invalid_argument(fmt::format("--progress must be auto, bar or plain (got '{}')", name));
}

void Progress::begin_epoch(int epoch, std::int64_t steps) {
  epoch_ = epoch;
  steps_ = steps;
  epoch_start_ = std::chrono::steady_clock::now();
  last_draw_ = {};
  drawn_ = false;
}

void Progress::step(std::int64_t step, double loss, double images_per_s) {
  if (!enabled_ || !tty_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100) && step < steps_) return;
  last_draw_ = now;
  drawn_ = true;
  constexpr int kWidth = 30;
  const double frac = steps_ > 0 ? static_cast<double>(step) / static_cast<double>(steps_) : 1.0;
  const int filled = static_cast<int>(frac * kWidth);
  const double elapsed = std::chrono::duration<double>(now - epoch_start_).count();
  const double eta = frac > 0.0 ? elapsed * (1.0 - frac) / frac : 0.0;
  fmt::print(stderr, "\r\033[Kepoch {}/{} [{}{}] {}/{} loss {:.4f} {:.0f} img/s ETA {:.0f}s", epoch_, epochs_,
             std::string(static_cast<std::size_t>(filled), '#'), std::string(static_cast<std::size_t>(kWidth - filled), '.'),
             step, steps_, loss, images_per_s, eta);
  std::fflush(stderr);
}

void Progress::end_epoch(const std::string& line) {
  if (!enabled_) return;
  if (tty_ && drawn_) fmt::print(stderr, "\r\033[K");
  fmt::print("{}\n", line);
  std::fflush(stdout);
  drawn_ = false;
}

void Progress::note(const std::string& line) {
  if (!enabled_) return;
  if (tty_ && drawn_) fmt::print(stderr, "\r\033[K");
  fmt::print("{}\n", line);
  std::fflush(stdout);
  drawn_ = false;
}

}  // namespace ringtrain
