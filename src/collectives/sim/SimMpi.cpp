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
#include "collectives/sim/SimMpiState.h"

#include <cstring>
#include <stdexcept>
#include <string>

using ringtrain::sim::kNoRequest;
using ringtrain::sim::OpKind;
using ringtrain::sim::RequestRef;
using ringtrain::sim::SimRuntime;
using namespace ringtrain::sim::mpi;

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

namespace ringtrain::sim::mpi {

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

void complete(ompi_request_t* request) {
  request->complete = true;
  SimRuntime::current().wake(request);
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

}  // namespace ringtrain::sim::mpi

namespace {

std::uint64_t channel_key(const ompi_communicator_t* comm, int src, int dst, int tag) {
  return (static_cast<std::uint64_t>(comm->id) << 48) |
         (static_cast<std::uint64_t>(tag & 0xffff) << 32) |
         (static_cast<std::uint64_t>(src) << 16) | static_cast<std::uint64_t>(dst);
}

void deliver(const void* payload, std::size_t bytes, const PendingRecv& recv) {
  if (bytes > recv.capacity)
    throw std::runtime_error("simulated MPI: message of " + std::to_string(bytes) +
                             " bytes into a receive of " + std::to_string(recv.capacity));
  if (bytes > 0) std::memcpy(recv.buffer, payload, bytes);
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

}  // extern "C"
