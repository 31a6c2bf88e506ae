// Ring all-reduce over MPI point-to-point (reduce-scatter then all-gather), in place,
// pipelined in chunks, with an fp32 or 16-bit (bf16 / fp16) transport.
//
// Each of the N ranks sends and receives 2(N-1)/N of the buffer, which is bandwidth
// optimal (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
// workstations", JPDC 2009; Thakur, Rabenseifner & Gropp, "Optimization of collective
// communication operations in MPICH", IJHPCA 2005).
#pragma once

#include "collectives/Mpi.h"

#include <cstdint>
#include <span>
#include <vector>

#include "collectives/AllreduceScratch.h"
#include "collectives/Communicator.h"
#include "collectives/TrafficStats.h"

namespace ringtrain {

struct RingOptions {
  // Bytes on the wire per message: the pipeline unit (chunk k+1 travels while chunk k is
  // reduced). See AllreduceTuning.h for the values used on shared memory and networks.
  std::size_t chunk_bytes = 1024 * 1024;
  // Receives posted ahead (2 = double-buffered).
  int recv_depth = 2;
  // No message larger than chunk_bytes: across hosts the chunk is kept below the TCP
  // eager limit, and a segment sent whole past it pays the rendezvous handshake the chunk
  // size exists to avoid. Otherwise a segment of up to two chunks goes whole.
  bool chunk_is_limit = false;
  // The ranks of `comm` in ring order (a permutation; empty: rank order). Each rank sends
  // to the next and receives from the previous; segments are numbered by ring position.
  std::span<const int> order;
};

// data <- (sum over the ranks of `comm`) * scale. Every rank passes the same data.size(),
// scale and compression; all end with bit-identical data. Additions are in fp32; with
// 16-bit transport the partial sums are rounded at every hop and the owner of a reduced
// segment rounds its own copy as well, so that every rank holds the same values. Adds its
// traffic and waits to `stats`.
void ring_allreduce(MPI_Comm comm, std::span<float> data, float scale, Compression compression,
                    const RingOptions& options, AllreduceScratch& scratch, TrafficStats& stats);

// Payload elements rank `rank` of `ranks` sends / receives in one ring all-reduce of
// `count` elements, accounting for uneven segments (segment i has
// partition_size(count, N, i)); times 4 for fp32 transport, times 2 for 16-bit.
std::uint64_t ring_elements_sent(std::size_t count, int ranks, int rank);
std::uint64_t ring_elements_received(std::size_t count, int ranks, int rank);

}  // namespace ringtrain
