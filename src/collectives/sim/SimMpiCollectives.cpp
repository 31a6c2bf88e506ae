// The simulated MPI's collectives (SimMpiState.h): every member's call joins one slot per
// (communicator, call), and the last to arrive does the work for all of them.
#include "collectives/sim/SimMpiState.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

using ringtrain::sim::kNoRequest;
using ringtrain::sim::OpKind;
using ringtrain::sim::RequestRef;
using ringtrain::sim::SimRuntime;
using namespace ringtrain::sim::mpi;

namespace {

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
