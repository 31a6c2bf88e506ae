// The stop-signal thread and the stop flag.
#include "run/StopSignals.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace ringtrain {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_polled{false};

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  // SIGUSR2 too: mpirun forwards it to every rank at once, whereas on SIGTERM/SIGINT it
  // sends SIGCONT, then SIGTERM only after odls_base_sigkill_timeout seconds, then SIGKILL
  // after as many again, and exits 1 whatever the ranks do. scripts/mpirun/run.sh turns a
  // SIGTERM/SIGINT it receives into SIGUSR2 to mpirun.
  sigaddset(&set, SIGUSR2);
  return set;
}

}  // namespace

void take_stop_signals_in_thread() {
  static std::once_flag once;
  std::call_once(once, [] {
    const sigset_t set = stop_signal_set();
    if (const int err = pthread_sigmask(SIG_BLOCK, &set, nullptr); err != 0) {
      throw std::runtime_error(std::string("cannot block SIGTERM/SIGINT/SIGUSR2: ") + std::strerror(err));
    }
    // Detached: it waits for the process's whole life; exit() does not wait for it. Every
    // later signal sets the flag again, which is harmless: the loop stops once.
    std::thread([set] {
      for (;;) {
        int signal = 0;
        if (sigwait(&set, &signal) != 0) continue;
        if (!g_polled.load(std::memory_order_acquire)) std::_Exit(128 + signal);
        g_stop.store(true, std::memory_order_relaxed);
      }
    }).detach();
  });
}

void set_stop_signals_polled(bool polled) noexcept { g_polled.store(polled, std::memory_order_release); }
void request_stop() noexcept { g_stop.store(true, std::memory_order_relaxed); }
bool stop_requested() noexcept { return g_stop.load(std::memory_order_relaxed); }
void clear_stop_request() noexcept { g_stop.store(false, std::memory_order_relaxed); }

}  // namespace ringtrain
