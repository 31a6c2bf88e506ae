// The MPI calls of MpiCommunicator and the all-reduce algorithms, for virtual ranks in one
// process (SimRuntime): the simulator links this file instead of libmpi, so the real
// algorithm code runs unchanged and its point-to-point traffic is recorded, with the
// payload really moved (a recorded run computes the real sum).
//
// Semantics kept: messages between a pair match in order per communicator and tag (MPI's
// non-overtaking rule); a send completes at once (the payload is copied, as an eager send
// buffers it), a receive when its message is there; collectives complete when every member
// has called them. Only what the tree uses is here: no MPI_ANY_SOURCE, no datatypes other
// than the predefined ones, no error handlers (every call succeeds or throws).
#include "collectives/Mpi.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "collectives/sim/SimRuntime.h"

using ringtrain::sim::kNoRequest;
using ringtrain::sim::Op;
using ringtrain::sim::OpKind;
using ringtrain::sim::RequestRef;
using ringtrain::sim::SimRuntime;

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
  std::uint64_t id = kNoRequest;
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

ompi_predefined_communicator_t ompi_mpi_comm_world;
ompi_predefined_communicator_t ompi_mpi_comm_null;
ompi_predefined_request_t ompi_request_null;
ompi_predefined_datatype_t ompi_mpi_byte{{1, 5}};
ompi_predefined_datatype_t ompi_mpi_char{{1, 5}};
ompi_predefined_datatype_t ompi_mpi_int{{4, 0}};
ompi_predefined_datatype_t ompi_mpi_float{{4, 1}};
ompi_predefined_datatype_t ompi_mpi_double{{8, 2}};
ompi_predefined_datatype_t ompi_mpi_uint16_t{{2, 5}};
ompi_predefined_datatype_t ompi_mpi_int64_t{{8, 3}};
ompi_predefined_datatype_t ompi_mpi_uint64_t{{8, 4}};
ompi_predefined_op_t ompi_mpi_op_sum{{0}};
ompi_predefined_op_t ompi_mpi_op_max{{1}};
ompi_predefined_win_t ompi_mpi_win_null;
ompi_predefined_info_t ompi_mpi_info_null;
ompi_predefined_errhandler_t ompi_mpi_errors_return;

namespace {

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

State& state() {
  static State s;
  SimRuntime& runtime = SimRuntime::current();
  if (s.generation != runtime.generation()) {
    s = State{};
    s.generation = runtime.generation();
    auto& world = ompi_mpi_comm_world.comm;
    world = ompi_communicator_t{};
    for (int r = 0; r < runtime.ranks(); ++r) {
      world.members.push_back(r);
      world.rank_of[r] = r;
    }
    world.calls.assign(static_cast<std::size_t>(runtime.ranks()), 0);
  }
  return s;
}

int comm_rank(MPI_Comm comm) {
  state();
  if (comm == MPI_COMM_NULL) throw std::invalid_argument("simulated MPI: MPI_COMM_NULL used");
  return comm->rank_of.at(SimRuntime::current().rank());
}

std::uint64_t channel_key(const ompi_communicator_t* comm, int src, int dst, int tag) {
  return (static_cast<std::uint64_t>(comm->id) << 48) |
         (static_cast<std::uint64_t>(tag & 0xffff) << 32) |
         (static_cast<std::uint64_t>(src) << 16) | static_cast<std::uint64_t>(dst);
}

void complete(ompi_request_t* request) {
  request->complete = true;
  SimRuntime::current().wake(request);
}

void deliver(const void* payload, std::size_t bytes, const PendingRecv& recv) {
  if (bytes > recv.capacity)
    throw std::runtime_error("simulated MPI: message of " + std::to_string(bytes) +
                             " bytes into a receive of " + std::to_string(recv.capacity));
  if (bytes > 0) std::memcpy(recv.buffer, payload, bytes);
}

// The last arrival of a collective does its work for everyone.
void finish_slot(Slot& slot, MPI_Comm comm);

ompi_request_t* join_collective(MPI_Comm comm, CollKind kind, Arrival arrival, MPI_Datatype type = nullptr,
                                MPI_Op op = nullptr, int count = 0, int root = 0) {
  State& s = state();
  SimRuntime& runtime = SimRuntime::current();
  const int me = comm_rank(comm);
  const std::uint64_t call = comm->calls[static_cast<std::size_t>(me)]++;
  const std::uint64_t key = (static_cast<std::uint64_t>(comm->id) << 40) | call;
  auto& slot = s.slots[key];
  if (!slot) {
    slot = std::make_unique<Slot>();
    slot->kind = kind, slot->type = type, slot->op = op, slot->count = count, slot->root = root;
    slot->arrivals.resize(comm->members.size());
    auto& collectives = runtime.schedule().collectives;
    slot->index = collectives.size();
    collectives.push_back({comm->members, std::vector<std::uint64_t>(comm->members.size(), kNoRequest),
                           static_cast<std::uint64_t>(count) * (type ? type->size : 0)});
  }
  auto* request = new ompi_request_t;
  request->id = runtime.new_request(RequestRef::Kind::kCollective, slot->index);
  runtime.schedule().collectives[slot->index].requests[static_cast<std::size_t>(me)] = request->id;
  runtime.record({OpKind::kCollective, -1, 0, runtime.schedule().collectives[slot->index].bytes, request->id});
  arrival.request = request;
  slot->arrivals[static_cast<std::size_t>(me)] = std::move(arrival);
  if (++slot->arrived == static_cast<int>(comm->members.size())) {
    finish_slot(*slot, comm);
    for (auto& a : slot->arrivals) complete(a.request);
    s.slots.erase(key);
  }
  return request;
}

// Blocking wait on a request, recorded as a wait.
void wait_request(MPI_Request* request) {
  if (*request == MPI_REQUEST_NULL) return;
  SimRuntime& runtime = SimRuntime::current();
  runtime.record({OpKind::kWait, -1, 0, 0, (*request)->id});
  while (!(*request)->complete) runtime.block_on(*request);
  delete *request;
  *request = MPI_REQUEST_NULL;
}

int blocking_collective(MPI_Comm comm, CollKind kind, Arrival arrival, MPI_Datatype type = nullptr,
                        MPI_Op op = nullptr, int count = 0, int root = 0) {
  MPI_Request request = join_collective(comm, kind, std::move(arrival), type, op, count, root);
  wait_request(&request);
  return MPI_SUCCESS;
}

template <class T>
void combine(T* dst, const T* src, int count, int op) {
  for (int i = 0; i < count; ++i) dst[i] = op == 0 ? dst[i] + src[i] : std::max(dst[i], src[i]);
}

void reduce_into(void* dst, const void* src, int count, MPI_Datatype type, MPI_Op op) {
  switch (type->kind) {
    case 0: combine(static_cast<int*>(dst), static_cast<const int*>(src), count, op->kind); return;
    case 1: combine(static_cast<float*>(dst), static_cast<const float*>(src), count, op->kind); return;
    case 2: combine(static_cast<double*>(dst), static_cast<const double*>(src), count, op->kind); return;
    case 3: combine(static_cast<std::int64_t*>(dst), static_cast<const std::int64_t*>(src), count, op->kind); return;
    case 4: combine(static_cast<std::uint64_t*>(dst), static_cast<const std::uint64_t*>(src), count, op->kind); return;
    default: throw std::invalid_argument("simulated MPI: no reduction for this datatype");
  }
}

MPI_Comm new_comm(const std::vector<int>& world_members) {
  State& s = state();
  auto comm = std::make_unique<ompi_communicator_t>();
  comm->id = s.next_comm_id++;
  comm->members = world_members;
  for (std::size_t i = 0; i < world_members.size(); ++i) comm->rank_of[world_members[i]] = static_cast<int>(i);
  comm->calls.assign(world_members.size(), 0);
  s.comms.push_back(std::move(comm));
  return s.comms.back().get();
}

void finish_split(Slot& slot, MPI_Comm comm) {
  std::vector<int> order(comm->members.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return slot.arrivals[a].key < slot.arrivals[b].key;
  });
  std::unordered_map<int, MPI_Comm> by_color;
  std::unordered_map<int, std::vector<int>> members;
  for (int i : order) {
    if (slot.arrivals[i].color != MPI_UNDEFINED) members[slot.arrivals[i].color].push_back(comm->members[i]);
  }
  for (auto& [color, world] : members) by_color[color] = new_comm(world);
  for (auto& a : slot.arrivals) *a.new_comm = a.color == MPI_UNDEFINED ? MPI_COMM_NULL : by_color[a.color];
}

void finish_win(Slot& slot) {
  auto win = std::make_unique<ompi_win_t>();
  std::size_t total = 0;
  for (auto& a : slot.arrivals) {
    win->offsets.push_back(total);
    win->sizes.push_back(static_cast<std::size_t>(a.win_bytes));
    total += (static_cast<std::size_t>(a.win_bytes) + 63) / 64 * 64;
  }
  win->memory.assign(total + 64, 0);
  for (std::size_t i = 0; i < slot.arrivals.size(); ++i) {
    *static_cast<void**>(slot.arrivals[i].base) = win->memory.data() + win->offsets[i];
    *slot.arrivals[i].win = win.get();
  }
  state().wins.push_back(std::move(win));
}

void finish_slot(Slot& slot, MPI_Comm comm) {
  const std::size_t n = slot.arrivals.size();
  const std::size_t bytes = static_cast<std::size_t>(slot.count) * (slot.type ? slot.type->size : 0);
  switch (slot.kind) {
    case CollKind::kBarrier: return;
    case CollKind::kAllreduce: {
      std::vector<char> sum = slot.arrivals[0].input;
      for (std::size_t i = 1; i < n; ++i) reduce_into(sum.data(), slot.arrivals[i].input.data(), slot.count, slot.type, slot.op);
      for (auto& a : slot.arrivals) std::memcpy(a.output, sum.data(), bytes);
      return;
    }
    case CollKind::kBcast:
      for (auto& a : slot.arrivals) std::memcpy(a.output, slot.arrivals[static_cast<std::size_t>(slot.root)].input.data(), bytes);
      return;
    case CollKind::kAllgather:
      for (auto& a : slot.arrivals)
        for (std::size_t i = 0; i < n; ++i) std::memcpy(static_cast<char*>(a.output) + i * bytes, slot.arrivals[i].input.data(), bytes);
      return;
    case CollKind::kAllgatherv:
      for (auto& a : slot.arrivals)
        for (std::size_t i = 0; i < n; ++i)
          std::memcpy(static_cast<char*>(a.output) + a.displs[i], slot.arrivals[i].input.data(), slot.arrivals[i].input.size());
      return;
    case CollKind::kDup:
      for (auto& a : slot.arrivals) a.color = 0;
      finish_split(slot, comm);
      return;
    case CollKind::kSplit: finish_split(slot, comm); return;
    case CollKind::kWin: finish_win(slot); return;
  }
}

Arrival with_input(const void* data, std::size_t bytes, void* output = nullptr) {
  Arrival a;
  a.input.assign(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
  a.output = output;
  return a;
}

}  // namespace

extern "C" {

int MPI_Initialized(int* flag) { *flag = 1; return MPI_SUCCESS; }
int MPI_Finalized(int* flag) { *flag = 0; return MPI_SUCCESS; }
int MPI_Query_thread(int* provided) { *provided = MPI_THREAD_SERIALIZED; return MPI_SUCCESS; }
int MPI_Comm_set_errhandler(MPI_Comm, MPI_Errhandler) { return MPI_SUCCESS; }
int MPI_Win_lock_all(int, MPI_Win) { return MPI_SUCCESS; }
int MPI_Win_unlock_all(MPI_Win) { return MPI_SUCCESS; }
int MPI_Win_sync(MPI_Win) { return MPI_SUCCESS; }

int MPI_Error_string(int code, char* text, int* length) {
  const std::string message = "simulated MPI error " + std::to_string(code);
  std::strcpy(text, message.c_str());
  *length = static_cast<int>(message.size());
  return MPI_SUCCESS;
}

int MPI_Get_processor_name(char* name, int* length) {
  const std::string text = "sim-node-" + std::to_string(SimRuntime::current().rank() / SimRuntime::current().ranks_per_node());
  std::strcpy(name, text.c_str());
  *length = static_cast<int>(text.size());
  return MPI_SUCCESS;
}

int MPI_Get_library_version(char* version, int* length) {
  const char* text = "ringtrain simulated MPI";
  std::strcpy(version, text);
  *length = static_cast<int>(std::strlen(text));
  return MPI_SUCCESS;
}

int MPI_Comm_rank(MPI_Comm comm, int* rank) {
  state();
  *rank = comm_rank(comm);
  return MPI_SUCCESS;
}

int MPI_Comm_size(MPI_Comm comm, int* size) {
  state();
  *size = static_cast<int>(comm->members.size());
  return MPI_SUCCESS;
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* out) {
  Arrival a;
  a.new_comm = out;
  a.key = comm_rank(comm);
  return blocking_collective(comm, CollKind::kDup, std::move(a));
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* out) {
  Arrival a;
  a.new_comm = out, a.color = color, a.key = key;
  return blocking_collective(comm, CollKind::kSplit, std::move(a));
}

int MPI_Comm_split_type(MPI_Comm comm, int, int key, MPI_Info, MPI_Comm* out) {
  SimRuntime& runtime = SimRuntime::current();
  return MPI_Comm_split(comm, runtime.rank() / runtime.ranks_per_node(), key, out);
}

int MPI_Comm_free(MPI_Comm* comm) { *comm = MPI_COMM_NULL; return MPI_SUCCESS; }

int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request* request) {
  State& s = state();
  SimRuntime& runtime = SimRuntime::current();
  auto& schedule = runtime.schedule();
  const std::size_t bytes = static_cast<std::size_t>(count) * type->size;
  const int src = runtime.rank();
  const int dst = comm->members.at(static_cast<std::size_t>(dest));
  const std::uint64_t message = schedule.messages.size();
  auto* req = new ompi_request_t;
  req->id = runtime.new_request(RequestRef::Kind::kSend, message);
  schedule.messages.push_back({src, dst, bytes, req->id, kNoRequest});
  runtime.record({OpKind::kSend, dst, tag, bytes, req->id});
  Channel& channel = s.channels[channel_key(comm, src, dst, tag)];
  if (!channel.posted.empty()) {
    const PendingRecv recv = channel.posted.front();
    channel.posted.pop_front();
    deliver(buf, bytes, recv);
    schedule.messages[message].recv_request = recv.request->id;
    schedule.requests[recv.request->id].index = message;
    complete(recv.request);
  } else {
    const char* p = static_cast<const char*>(buf);
    channel.unexpected.push_back({std::vector<char>(p, p + bytes), message});
  }
  req->complete = true;
  *request = req;
  return MPI_SUCCESS;
}

int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request* request) {
  State& s = state();
  SimRuntime& runtime = SimRuntime::current();
  const std::size_t capacity = static_cast<std::size_t>(count) * type->size;
  const int src = comm->members.at(static_cast<std::size_t>(source));
  const std::uint64_t key = channel_key(comm, src, runtime.rank(), tag);
  auto* req = new ompi_request_t;
  req->id = runtime.new_request(RequestRef::Kind::kRecv, kNoRequest);
  runtime.record({OpKind::kRecv, src, tag, capacity, req->id});
  Channel& channel = s.channels[key];
  const PendingRecv recv{buf, capacity, req};
  if (!channel.unexpected.empty()) {
    Unexpected& first = channel.unexpected.front();
    deliver(first.payload.data(), first.payload.size(), recv);
    runtime.schedule().messages[first.message].recv_request = req->id;
    runtime.schedule().requests[req->id].index = first.message;
    channel.unexpected.pop_front();
    req->complete = true;
  } else {
    channel.posted.push_back(recv);
  }
  *request = req;
  return MPI_SUCCESS;
}

int MPI_Wait(MPI_Request* request, MPI_Status*) {
  wait_request(request);
  return MPI_SUCCESS;
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status*) {
  for (int i = 0; i < count; ++i) wait_request(&requests[i]);
  return MPI_SUCCESS;
}

int MPI_Barrier(MPI_Comm comm) { return blocking_collective(comm, CollKind::kBarrier, Arrival{}); }

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  *request = join_collective(comm, CollKind::kBarrier, Arrival{});
  return MPI_SUCCESS;
}

int MPI_Iallreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request) {
  const void* input = send == MPI_IN_PLACE ? recv : send;
  *request = join_collective(comm, CollKind::kAllreduce,
                             with_input(input, static_cast<std::size_t>(count) * type->size, recv), type, op, count);
  return MPI_SUCCESS;
}

int MPI_Allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  MPI_Request request;
  MPI_Iallreduce(send, recv, count, type, op, comm, &request);
  wait_request(&request);
  return MPI_SUCCESS;
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  return blocking_collective(comm, CollKind::kBcast, with_input(buffer, static_cast<std::size_t>(count) * type->size, buffer),
                             type, nullptr, count, root);
}

int MPI_Allgather(const void* send, int count, MPI_Datatype type, void* recv, int, MPI_Datatype, MPI_Comm comm) {
  return blocking_collective(comm, CollKind::kAllgather, with_input(send, static_cast<std::size_t>(count) * type->size, recv),
                             type, nullptr, count);
}

int MPI_Allgatherv(const void* send, int count, MPI_Datatype type, void* recv, const int counts[], const int displs[],
                   MPI_Datatype, MPI_Comm comm) {
  Arrival a = with_input(send, static_cast<std::size_t>(count) * type->size, recv);
  a.counts = counts, a.displs = displs;
  return blocking_collective(comm, CollKind::kAllgatherv, std::move(a), type, nullptr, count);
}

int MPI_Win_allocate_shared(MPI_Aint size, int, MPI_Info, MPI_Comm comm, void* base, MPI_Win* win) {
  Arrival a;
  a.win_bytes = size, a.base = base, a.win = win;
  return blocking_collective(comm, CollKind::kWin, std::move(a));
}

int MPI_Win_shared_query(MPI_Win win, int rank, MPI_Aint* size, int* unit, void* base) {
  *size = static_cast<MPI_Aint>(win->sizes.at(static_cast<std::size_t>(rank)));
  *unit = 1;
  *static_cast<void**>(base) = win->memory.data() + win->offsets[static_cast<std::size_t>(rank)];
  return MPI_SUCCESS;
}

int MPI_Win_free(MPI_Win* win) { *win = MPI_WIN_NULL; return MPI_SUCCESS; }

}  // extern "C"
