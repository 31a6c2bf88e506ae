// One rank's progress as the stall watchdogs tell each other over their side channel
// (StallChannel.h): step, phase, the operation and wait it is in, and how long its state
// has stood still. Encoded as a fixed 128-byte record (explicit little-endian fields and
// NUL-padded text), so a record from another process never carries a pointer and a
// malformed one cannot overrun anything.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "collectives/StallRecord.h"

namespace ringtrain {

struct StallStatus {
  static constexpr std::size_t kWireBytes = 128;

  std::int64_t step = 0;
  int bucket = -1;
  int buckets = 0;
  int peer = StallRecord::kAllRanks;
  bool waiting = false;
  double wait_s = 0.0;   // how long its current wait had lasted when it reported
  double still_s = 0.0;  // how long its record had not changed (no wait begun or ended)
  std::string phase;
  std::string operation;
  std::string what;

  // From this process's record: `wait_s` and `still_s` measured by the watchdog.
  static StallStatus from(const StallRecord::Snapshot& s, double wait_s, double still_s);

  void encode(std::span<std::byte, kWireBytes> out) const;
  static StallStatus decode(std::span<const std::byte, kWireBytes> in);

  // "step 57, evaluation, in all-reduce of metrics (MPI_Allreduce) waiting for every rank
  // for 3.1 s" / "step 60, writing checkpoint, outside MPI for 4.0 s": as reported.
  std::string where() const;
};

// What a rank knows of another: its last status and how long ago it was heard from.
struct PeerView {
  int rank = 0;
  std::string host;
  bool heard = false;      // any status arrived since the channel opened
  double silent_s = 0.0;   // since its last status (or since the channel opened)
  StallStatus last;        // as reported, silent_s ago
  bool exited = false;     // its side channel closed: the process ended (the job is ending)
};

}  // namespace ringtrain
