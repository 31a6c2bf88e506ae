// A discrete-event simulation of a recorded all-reduce schedule (Schedule.h) on a cluster:
// every node has one network link with its own bandwidth in each direction, ranks of one
// node talk through shared memory, messages above the eager limit wait for the receiver
// (rendezvous), and additions and copies cost the rank's time.
#pragma once

#include <cstdint>
#include <vector>

#include "collectives/AllreduceCostModel.h"
#include "collectives/sim/Schedule.h"

namespace ringtrain::sim {

struct NetworkParams {
  double alpha_s = 50e-6;                     // one-way latency + per-message overhead, network
  double beta_s_per_byte = 8.06e-9;           // per byte on a node's link, each direction
  // The same for a message above the eager limit whose handshake waits behind an exchange
  // (NetworkSimulator.cpp: handshake_exposed); other such messages move at beta.
  double rendezvous_beta_s_per_byte = 12.5e-9;
  double gamma_s_per_byte = 0.1e-9;           // per byte of fp32 added
  double eager_limit_bytes = 65536;           // larger network messages go by rendezvous
  double delay_s = 0.0;                       // added one-way delay on every network message (netem)
  // One-way latency between ranks of one node: the one-host ring's 1 KiB call at 4 ranks,
  // 12.3 us over 6 steps (allreduce-shared-memory.txt).
  double shm_alpha_s = 2e-6;
  // Per byte copied between ranks of one node: the one-host ring at 4 ranks reached 3.6 GB/s
  // bus bandwidth at 16-256 MiB (docs/benchmarks/allreduce-shared-memory.txt).
  double shm_beta_s_per_byte = 0.28e-9;

  // alpha, beta, rendezvous beta, gamma and the eager limit from the cost model (the tuning
  // file); the rest as above.
  static NetworkParams from_cost_model(const AllreduceCostModel& model);
};

struct SimResult {
  double seconds = 0.0;              // the last rank's finish; every rank starts at 0
  std::uint64_t network_bytes = 0;   // bytes that crossed a node's link (scaled)
  std::uint64_t network_messages = 0;
  std::uint64_t shm_messages = 0;
};

// Throws std::runtime_error when the schedule cannot complete (a wait on a request that
// never completes: an inconsistent recording).
SimResult simulate(const Schedule& schedule, const NetworkParams& params);

}  // namespace ringtrain::sim
