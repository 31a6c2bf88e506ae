// SharedCounter without MPI (threads of one process share the word as processes share a
// window): a waiter returns once the counter reaches its target and not before, sees the
// data written before the store, returns at once for a target already passed, and counts
// across the 2^32 wrap.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "collectives/SharedCounter.h"

using namespace ringtrain;

TEST_CASE("SharedCounter: a waiter wakes once the target is reached, with the data written before") {
  alignas(64) std::uint32_t word = 0;
  int payload = 0;  // plain data, ordered by the counter's release/acquire
  SharedCounter counter(&word);
  std::atomic<bool> returned{false};
  int seen = -1;
  std::thread waiter([&] {
    SharedCounter(&word).wait_until(3);
    seen = payload;
    returned.store(true);
  });
  counter.store(1);
  counter.store(2);
  // Below the target: the waiter must still be waiting (a sleep long enough for a wrong
  // early return to show; a loaded machine can only make it wait longer).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(returned.load());
  payload = 42;
  counter.store(3);
  waiter.join();
  CHECK(returned.load());
  CHECK(seen == 42);
  CHECK(counter.load() == 3);
}

TEST_CASE("SharedCounter: a passed target returns at once, also across the wrap") {
  alignas(64) std::uint32_t word = 0;
  SharedCounter counter(&word);
  counter.store(10);
  counter.wait_until(5);    // already passed
  counter.wait_until(10);   // reached exactly
  counter.store(0xFFFFFFF0u);
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    SharedCounter(&word).wait_until(0x00000002u);  // 18 past 0xFFFFFFF0, after the wrap
    returned.store(true);
  });
  counter.store(0xFFFFFFFFu);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(returned.load());
  counter.store(0x00000003u);
  waiter.join();
  CHECK(returned.load());
}
