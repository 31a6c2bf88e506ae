// What the simulated ranks did in one recorded all-reduce (ScheduleRecorder.h): each rank's
// operations in program order, the messages that matched, the collectives inside the
// algorithm (hier's node barrier, fp16's range check) and hier's shared-counter signals.
#pragma once

#include <cstdint>
#include <vector>

namespace ringtrain::sim {

enum class OpKind : std::uint8_t {
  kSend,        // MPI_Isend: peer = destination rank, bytes, tag, id = request
  kRecv,        // MPI_Irecv posted: peer = source rank, bytes = buffer size, tag, id = request
  kWait,        // MPI_Wait / each request of MPI_Waitall: id = request
  kReduce,      // reduce_add / reduce_add_scale / scale_in_place: bytes of fp32 touched
  kCopy,        // memcpy in hier (to and from the shared window): bytes
  kCollective,  // a collective posted (MPI_Ibarrier, MPI_Iallreduce, ...): id = request, bytes
  kSignal,      // a SharedCounter store: id = signal
  kAwait,       // a SharedCounter load or wait that saw signal `id`'s value: happens after it
};

struct Op {
  OpKind kind = OpKind::kWait;
  int peer = -1;
  int tag = 0;
  std::uint64_t bytes = 0;
  std::uint64_t id = 0;
};

// A point-to-point message as MPI matched it (FIFO per communicator, source, tag).
struct Message {
  int src = 0;
  int dst = 0;
  std::uint64_t bytes = 0;
  std::uint64_t send_request = 0;
  std::uint64_t recv_request = 0;  // kNoRequest until matched
};

// One collective call: its members (world ranks) and each member's request.
struct CollectiveCall {
  std::vector<int> members;
  std::vector<std::uint64_t> requests;
  std::uint64_t bytes = 0;
};

// What a request id stands for.
struct RequestRef {
  enum class Kind : std::uint8_t { kSend, kRecv, kCollective } kind = Kind::kSend;
  std::uint64_t index = 0;  // into messages (send, recv) or collectives
};

inline constexpr std::uint64_t kNoRequest = ~0ull;

struct Schedule {
  int ranks = 1;
  int ranks_per_node = 1;
  // Recorded bytes times byte_scale are the bytes of the call the schedule stands for
  // (ScheduleRecorder records large calls at a reduced size, see there).
  double byte_scale = 1.0;
  std::vector<std::vector<Op>> ops;  // per rank, program order
  std::vector<Message> messages;
  std::vector<CollectiveCall> collectives;
  std::vector<RequestRef> requests;  // indexed by request id
  std::uint64_t signals = 0;         // signal ids are 0..signals-1

  int node_of(int rank) const { return rank / ranks_per_node; }
};

}  // namespace ringtrain::sim
