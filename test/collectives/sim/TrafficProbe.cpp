// traffic_probe: runs one real all-reduce per algorithm and size under mpirun and prints the
// bytes and calls each rank passed to MPI_Isend per destination, in allreduce_sim --traffic's format,
// so check_recorded_traffic.py can compare the recorded schedules with a real run.
// MPI_Isend is intercepted through MPI's profiling interface (PMPI): every call the
// algorithms make lands here first. Each rank's count is also checked against the
// communicator's own TrafficStats (bytes_sent()).
//
//   mpirun -np N traffic_probe RANKS_PER_NODE ALGO[,ALGO...] BYTES[,BYTES...] [RAB_LANES]
// RAB_LANES (default 0, the model's): rab's lanes, as allreduce_sim --rab-lanes.
#include "collectives/Mpi.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "collectives/BenchRunner.h"
#include "collectives/MpiCommunicator.h"

namespace {

bool g_counting = false;
std::vector<unsigned long long> g_sent;      // bytes, by world rank of the destination
std::vector<unsigned long long> g_messages;  // MPI_Isend calls, the same

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

int world_rank_of(MPI_Comm comm, int rank) {
  MPI_Group group, world;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int out = 0;
  MPI_Group_translate_ranks(group, 1, &rank, world, &out);
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  return out;
}

}  // namespace

extern "C" int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                         MPI_Request* request) {
  if (g_counting) {
    int size = 0;
    MPI_Type_size(type, &size);
    const auto to = static_cast<std::size_t>(world_rank_of(comm, dest));
    g_sent[to] += static_cast<unsigned long long>(count) * size;
    ++g_messages[to];
  }
  return PMPI_Isend(buf, count, type, dest, tag, comm, request);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (argc != 4 && argc != 5) {
    if (rank == 0) std::fprintf(stderr, "usage: traffic_probe RANKS_PER_NODE ALGOS BYTES [RAB_LANES]\n");
    MPI_Finalize();
    return 2;
  }
  ringtrain::MpiCommunicatorOptions options;
  options.node_group_size = std::atoi(argv[1]);
  if (argc == 5) options.tuning.rab_lanes = std::atoi(argv[4]);
  ringtrain::MpiCommunicator comm(MPI_COMM_WORLD, options);
  int mismatches = 0;
  if (rank == 0) std::printf("# algo bytes src dst sent_bytes messages\n");
  for (const std::string& algo : split(argv[2])) {
    for (const std::string& size : split(argv[3])) {
      const std::size_t bytes = ringtrain::parse_byte_size(size);
      std::vector<float> data(bytes / sizeof(float), 1.0f);
      g_sent.assign(static_cast<std::size_t>(ranks), 0);
      g_messages.assign(static_cast<std::size_t>(ranks), 0);
      const auto before = comm.bytes_sent();
      g_counting = true;
      comm.allreduce(data, ringtrain::parse_allreduce_algo(algo), false);
      g_counting = false;
      unsigned long long total = 0;
      for (auto b : g_sent) total += b;
      if (total != comm.bytes_sent() - before) ++mismatches;
      std::vector<unsigned long long> all(static_cast<std::size_t>(ranks) * ranks);
      std::vector<unsigned long long> all_messages(all.size());
      MPI_Gather(g_sent.data(), ranks, MPI_UNSIGNED_LONG_LONG, all.data(), ranks, MPI_UNSIGNED_LONG_LONG, 0,
                 MPI_COMM_WORLD);
      MPI_Gather(g_messages.data(), ranks, MPI_UNSIGNED_LONG_LONG, all_messages.data(), ranks, MPI_UNSIGNED_LONG_LONG,
                 0, MPI_COMM_WORLD);
      for (int src = 0; rank == 0 && src < ranks; ++src)
        for (int dst = 0; dst < ranks; ++dst) {
          const auto i = static_cast<std::size_t>(src * ranks + dst);
          if (all[i] > 0) std::printf("%s %zu %d %d %llu %llu\n", algo.c_str(), bytes, src, dst, all[i], all_messages[i]);
        }
    }
  }
  int any = 0;
  MPI_Allreduce(&mismatches, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0 && any > 0) std::fprintf(stderr, "traffic_probe: MPI_Isend bytes differ from bytes_sent() on %d calls\n", any);
  MPI_Finalize();
  return any > 0 ? 1 : 0;
}
