// `rab`: Rabenseifner's all-reduce (Thakur, Rabenseifner & Gropp 2005, section 4.5):
// reduce-scatter by recursive halving, all-gather by recursive doubling, pipelined in
// chunks like the ring, with an fp32 or 16-bit (bf16 / fp16) transport.
//
// Each of p = 2^k ranks sends and receives 2(p-1)/p of the vector, like the ring, in
// 2 log2 p rounds instead of 2(p-1): the ring's bandwidth at rd's latency.
#pragma once

#include "collectives/Mpi.h"

#include <cstddef>
#include <cstdint>
#include <span>

#include "collectives/AllreduceScratch.h"
#include "collectives/Communicator.h"
#include "collectives/TrafficStats.h"

namespace ringtrain {

// The most lanes rab runs (its tags are 7301 + lane, below the calibration's 7401).
inline constexpr int kMaxRabLanes = 64;

// data <- (sum over the ranks of `comm`) * scale, in place. Every message is at most
// `chunk_bytes` on the wire (keep it below the TCP eager limit across hosts). Every rank
// passes the same data.size(), scale and compression and ends with bit-identical data.
// Not a power of two: the first 2*rem ranks (rem = N - 2^k) fold in pairs, which sends
// the whole vector once from each even rank of them and back at the end (a limitation:
// those links carry n + 2(p-1)/p n instead of 2(N-1)/N n).
// `send_window` > 0: within a round a rank sends at most that many chunks ahead of the
// chunks it has received from its partner (0: every chunk of the round at once); the
// result does not depend on it.
// `order` lists the ranks of comm node by node (empty: rank order): rab numbers the ranks
// by their place in it, so the nearest partners share a node.
// `lanes` (1 to kMaxRabLanes): the vector is cut into that many contiguous parts
// (EvenPartition.h), each a complete Rabenseifner of its own (its own tag, the same
// partners and block structure), all progressed together: a lane starts its next round as
// soon as its current one is done, so its round latency overlaps the other lanes'
// transfers, where one lane would pay its 2 log2 p latencies and its bytes one after the
// other. Every rank ends with the same bits for any `lanes`. With fp32 transport they are
// also the same bits for every lane count: an element's sum is the same tree of pairwise
// additions whichever rank owns it (a + b == b + a). With 16-bit transport the owner adds
// the partner's narrowed partial sum to its own fp32 one, so moving block boundaries moves
// which partial is narrowed, and the last bits may differ between lane counts.
// The cost model chooses the count (choose_rab_lanes, AllreduceCostModel.h).
void rabenseifner_allreduce(MPI_Comm comm, std::span<float> data, float scale,
                            Compression compression, std::size_t chunk_bytes,
                            std::size_t send_window, std::span<const int> order, int lanes,
                            AllreduceScratch& scratch, TrafficStats& stats);

// Payload elements the rank at place `rank` of the order of `ranks` sends in one call of `count` elements (times
// 4 bytes for fp32 transport, 2 for 16-bit); fp16's range agreement not included.
std::uint64_t rab_elements_sent(std::size_t count, int ranks, int rank);
// The same with the vector cut into `lanes` parts (each part's own rab).
std::uint64_t rab_elements_sent(std::size_t count, int ranks, int rank, int lanes);

}  // namespace ringtrain
