// An alpha-beta-gamma model of the hand-written all-reduce algorithms as they are coded,
// for one rank per node (docs/benchmarks/allreduce-rab.md has the formulas and where the
// default parameters come from). It predicts; `auto` does not use it yet.
#pragma once

#include <cstddef>
#include <string>

#include "collectives/Communicator.h"

namespace ringtrain {

struct AllreduceCostModel {
  // Per round of messages: latency and per-message overhead. ~0 on the emulated 1 Gbit
  // links with a 128 KB tbf burst (2 nodes: 64 KiB took 517 us = n beta - 11 us).
  double alpha_s = 0.0;
  // Per byte on one link, each direction at once: 1 / 0.124 GB/s, the rate the ring and
  // rab reached from 1 MiB to 64 MiB on 2 emulated nodes (1 Gbit/s, MTU 1500).
  double beta_s_per_byte = 8.06e-9;
  // Per byte of fp32 vector added (reduce_add); small next to beta on a network.
  double gamma_s_per_byte = 0.1e-9;
};

// Predicted seconds of one all-reduce of `bytes` bytes of fp32 between `ranks` ranks, one
// per node, with `compression` on the wire (16-bit halves the wire bytes):
//   ring: 2(p-1) alpha + 2(p-1)/p w beta + (p-1)/p n gamma
//   rab:  2 log2(q) alpha + 2(q-1)/q w beta + (q-1)/q n gamma, q = 2^floor(log2 p),
//         plus 2 (alpha + w beta) + n gamma to fold the p - q surplus ranks in and out
//   rd:   as rab (fp32 only), or log2(q) (alpha + n beta + n gamma) plus the fold for
//         vectors of up to doubling_max_bytes (whole-vector doubling)
// where n = bytes, w = wire bytes. Throws std::invalid_argument for an algorithm the
// model does not cover (hier, ps, mpi, auto), ranks < 1, or rd with 16-bit transport.
double predict_allreduce_seconds(AllreduceAlgo algo, std::size_t bytes, int ranks,
                                 Compression compression, std::size_t doubling_max_bytes,
                                 const AllreduceCostModel& model);

// The tuning file: "key = value" lines (alpha_s, beta_s_per_byte, gamma_s_per_byte; '#'
// starts a comment; keys not given keep their defaults). Throws std::runtime_error naming
// the file and line for an unknown key, a malformed line or a negative or non-finite value.
AllreduceCostModel read_cost_model(const std::string& path);
void write_cost_model(const AllreduceCostModel& model, const std::string& path,
                      const std::string& comment);

}  // namespace ringtrain
