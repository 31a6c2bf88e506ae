// SharedCounter: a 32-bit counter in memory that the processes of one node share (an MPI
// shared-memory window), advanced by one process and awaited by others. A waiter sleeps in
// the kernel (a futex on Linux) instead of polling MPI: on the emulated cluster the ranks
// that wait for a node leader's network phase share two cores with the leader and with
// the kernel's packet work, and every poll or timed wake-up takes CPU from both.
#pragma once

#include <cstdint>

namespace ringtrain {

class SharedCounter {
 public:
  // `word` lies in memory shared between the processes (4-byte aligned) and outlives
  // this object.
  explicit SharedCounter(std::uint32_t* word) noexcept : word_(word) {}

  // The value, with acquire order: what the advancing process wrote before store() is
  // visible after a load() that sees its value.
  std::uint32_t load() const noexcept;
  // Sets the value with release order and wakes every waiter.
  void store(std::uint32_t value) noexcept;
  // Returns once the counter has reached `target`, counting modulo 2^32 (a counter that
  // only moves forward by less than 2^31 between waits). Spins briefly first: a target
  // that is about to be reached costs no system call.
  void wait_until(std::uint32_t target) const noexcept;

 private:
  bool reached(std::uint32_t target) const noexcept {
    return static_cast<std::int32_t>(load() - target) >= 0;
  }

  std::uint32_t* word_;
};

}  // namespace ringtrain
