// The simulated MPI's handles and state (SimMpi.cpp: the handles, point-to-point and waits;
// SimMpiCollectives.cpp: the collectives), shared by the two files that implement it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "collectives/Mpi.h"
#include "collectives/sim/SimRuntime.h"

struct ompi_communicator_t {
  int id = 0;
  std::vector<int> members;  // world ranks by comm rank
  std::unordered_map<int, int> rank_of;
  std::vector<std::uint64_t> calls;  // collectives called so far, per comm rank
};
struct ompi_predefined_communicator_t {
  ompi_communicator_t comm;
};
struct ompi_request_t {
  std::uint64_t id = ringtrain::sim::kNoRequest;
  bool complete = false;
};
struct ompi_predefined_request_t {
  ompi_request_t request;
};
struct ompi_datatype_t {
  int size;
  int kind;  // 0 int, 1 float, 2 double, 3 int64, 4 uint64, 5 bytes
};
struct ompi_predefined_datatype_t {
  ompi_datatype_t type;
};
struct ompi_op_t {
  int kind;  // 0 sum, 1 max
};
struct ompi_predefined_op_t {
  ompi_op_t op;
};
struct ompi_win_t {
  std::vector<char> memory;
  std::vector<std::size_t> offsets, sizes;  // per comm rank
};
struct ompi_predefined_win_t {
  ompi_win_t win;
};
struct ompi_info_t {};
struct ompi_predefined_info_t {
  ompi_info_t info;
};
struct ompi_errhandler_t {};
struct ompi_predefined_errhandler_t {
  ompi_errhandler_t handler;
};

namespace ringtrain::sim::mpi {

// One rank's part in a collective call.
struct Arrival {
  std::vector<char> input;
  void* output = nullptr;
  int color = 0, key = 0;
  MPI_Comm* new_comm = nullptr;
  const int* counts = nullptr;
  const int* displs = nullptr;
  MPI_Aint win_bytes = 0;
  void* base = nullptr;
  MPI_Win* win = nullptr;
  ompi_request_t* request = nullptr;
};

enum class CollKind { kBarrier, kAllreduce, kBcast, kAllgather, kAllgatherv, kDup, kSplit, kWin };

struct Slot {
  CollKind kind = CollKind::kBarrier;
  MPI_Datatype type = nullptr;
  MPI_Op op = nullptr;
  int count = 0, root = 0;
  std::vector<Arrival> arrivals;
  int arrived = 0;
  std::uint64_t index = 0;  // into the schedule's collectives
};

struct PendingRecv {
  void* buffer;
  std::size_t capacity;
  ompi_request_t* request;
};
struct Unexpected {
  std::vector<char> payload;
  std::uint64_t message;
};
struct Channel {
  std::deque<PendingRecv> posted;
  std::deque<Unexpected> unexpected;
};

struct State {
  std::uint64_t generation = 0;
  int next_comm_id = 1;
  std::vector<std::unique_ptr<ompi_communicator_t>> comms;
  std::vector<std::unique_ptr<ompi_win_t>> wins;
  std::unordered_map<std::uint64_t, Channel> channels;
  std::unordered_map<std::uint64_t, std::unique_ptr<Slot>> slots;  // by (comm id, call)
};

// This simulation's state, reset when SimRuntime starts a new run.
State& state();
int comm_rank(MPI_Comm comm);
void complete(ompi_request_t* request);
// Blocking wait on a request, recorded as a wait.
void wait_request(MPI_Request* request);

}  // namespace ringtrain::sim::mpi
