// SharedCounter (see SharedCounter.h): atomics on the shared word, futex wait and wake on
// Linux. The futex calls are the process-shared kind (no FUTEX_PRIVATE_FLAG): the word is
// mapped by several processes.
#include "collectives/SharedCounter.h"

#include <atomic>
#include <chrono>
#include <climits>
#include <thread>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#endif

namespace ringtrain {
namespace {

constexpr int kSpins = 256;

}  // namespace

std::uint32_t SharedCounter::load() const noexcept {
  return std::atomic_ref<std::uint32_t>(*word_).load(std::memory_order_acquire);
}

void SharedCounter::store(std::uint32_t value) noexcept {
  std::atomic_ref<std::uint32_t>(*word_).store(value, std::memory_order_release);
#if defined(__linux__)
  syscall(SYS_futex, word_, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
#endif
}

void SharedCounter::wait_until(std::uint32_t target) const noexcept {
  for (int i = 0; i < kSpins; ++i) {
    if (reached(target)) return;
  }
  for (;;) {
    const std::uint32_t seen = load();
    if (static_cast<std::int32_t>(seen - target) >= 0) return;
#if defined(__linux__)
    // Sleeps while the word still holds `seen`; a store() in between makes the call
    // return at once. The timeout only bounds the sleep should a wake-up be lost.
    timespec timeout{0, 50 * 1000 * 1000};
    syscall(SYS_futex, word_, FUTEX_WAIT, seen, &timeout, nullptr, 0);
#else
    std::this_thread::sleep_for(std::chrono::microseconds(50));
#endif
  }
}

}  // namespace ringtrain
