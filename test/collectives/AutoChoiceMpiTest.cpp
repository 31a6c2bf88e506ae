// auto across ranks: every rank plans the same algorithm for every size and transport, the
// tuning file is read on every rank and a file missing or different on one rank is the same
// error on every rank (no hang), and auto's sums stay exact. Each rank is its own "node"
// (node_group_size 1), so the cost model, not the one-host rule, decides.
#include "collectives/Mpi.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "collectives/AllreduceCostModel.h"
#include "collectives/CostModelFile.h"
#include "collectives/MpiCommunicator.h"
#include "support/mpi_test_util.h"

using namespace ringtrain;
using ringtrain::test::all_ranks;

namespace {

MpiCommunicatorOptions one_rank_per_node() {
  MpiCommunicatorOptions options;
  options.node_group_size = 1;
  return options;
}

// The plans for a range of sizes and both transports, as one line.
std::string plans_text(const MpiCommunicator& comm) {
  std::string text;
  for (std::size_t bytes = 4; bytes <= (std::size_t{1} << 28); bytes *= 4) {
    for (Compression c : {Compression::kNone, Compression::kBf16}) {
      const AllreducePlan plan = comm.plan_allreduce(AllreduceAlgo::kAuto, bytes, c);
      text += std::string(allreduce_algo_name(plan.algo)) + ":" + plan.basis + ";";
    }
  }
  return text;
}

std::string thrown_by(MpiCommunicator& comm, const std::string& path) {
  try {
    read_cost_model_everywhere(comm, path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("auto: every rank plans the same algorithm, by the cost model across nodes") {
  MpiCommunicator comm(MPI_COMM_WORLD, one_rank_per_node());
  const std::string mine = plans_text(comm);
  const std::vector<std::string> all = comm.allgather(mine);
  bool same = true;
  for (const auto& t : all) same = same && t == all[0];
  INFO(mine);
  REQUIRE(all_ranks(same));
  const AllreducePlan plan = comm.plan_allreduce(AllreduceAlgo::kAuto, 1 << 20, Compression::kNone);
  if (comm.size() > 1) {
    CHECK(plan.basis == "cost model");
    CHECK(plan.predicted_s.size() == 3);
  } else {
    CHECK(plan.basis == "one rank");
  }
  // A changed model changes the plan on every rank alike: with a huge latency the fewest
  // rounds win at 3 ranks (rd's whole-vector doubling + fold: 3 against the ring's 4).
  AllreduceCostModel slow;
  slow.alpha_s = 1.0;
  comm.set_cost_model(slow);
  const AllreducePlan latency = comm.plan_allreduce(AllreduceAlgo::kAuto, 1024, Compression::kNone);
  if (comm.size() > 1) CHECK(latency.algo == AllreduceAlgo::kRecursiveDoubling);
  // A forced algorithm is named as such, with its own prediction only.
  const AllreducePlan forced = comm.plan_allreduce(AllreduceAlgo::kRabenseifner, 1024, Compression::kNone);
  CHECK(forced.algo == AllreduceAlgo::kRabenseifner);
  CHECK(forced.basis == "forced");
  CHECK(forced.predicted_s.size() == (comm.size() > 1 ? 1u : 0u));
}

TEST_CASE("auto's sums are exact whatever it picks") {
  MpiCommunicator comm(MPI_COMM_WORLD, one_rank_per_node());
  const int n = comm.size();
  for (std::size_t count : {std::size_t{1}, std::size_t{300}, std::size_t{70000}}) {
    std::vector<float> data(count);
    for (std::size_t i = 0; i < count; ++i) data[i] = static_cast<float>((comm.rank() + 1) * (i % 7));
    comm.allreduce(data, AllreduceAlgo::kAuto, /*mean=*/false);
    bool ok = true;
    for (std::size_t i = 0; i < count; ++i) ok = ok && data[i] == static_cast<float>(n * (n + 1) / 2 * (i % 7));
    INFO("count " << count);
    REQUIRE(all_ranks(ok));
  }
}

TEST_CASE("tuning file on every rank: read alike, or one error on every rank") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int rank = comm.rank();
  const std::string dir = test::job_dir().string();
  // The same file everywhere: every rank gets its values.
  const std::string shared = dir + "/shared.tuning";
  if (rank == 0) {
    std::ofstream(shared) << "alpha_s = 2e-5\nchoice_margin = 0\n";
  }
  comm.barrier();
  AllreduceCostModel m;
  REQUIRE_NOTHROW(m = read_cost_model_everywhere(comm, shared));
  CHECK(m.alpha_s == 2e-5);
  CHECK(m.choice_margin == 0);
  CHECK(read_cost_model_everywhere(comm, "").alpha_s == AllreduceCostModel{}.alpha_s);
  // Missing on the last rank only (a node without the file): every rank throws the same.
  const std::string per_rank = dir + "/rank" + std::to_string(rank) + ".tuning";
  if (rank != comm.size() - 1) std::ofstream(per_rank) << "alpha_s = 2e-5\n";
  comm.barrier();
  {
    // Each rank reads its own file (as each node would read its own copy).
    const std::string path = comm.size() == 1 ? dir + "/absent.tuning" : per_rank;
    const std::string missing = thrown_by(comm, path);
    const std::vector<std::string> all = comm.allgather(missing);
    bool ok = !missing.empty() && missing.find(".tuning: cannot open the tuning file") != std::string::npos &&
              missing.find("(on rank(s) " + std::to_string(comm.size() - 1) + ")") != std::string::npos;
    for (const auto& t : all) ok = ok && t == all[0];
    INFO(missing);
    REQUIRE(all_ranks(ok));
  }
  // Different values on different ranks: the same error everywhere, naming the ranks.
  const std::string differs = dir + "/differs" + std::to_string(rank) + ".tuning";
  std::ofstream(differs) << "alpha_s = " << (rank == 0 ? "1e-5" : "3e-5") << "\n";
  comm.barrier();
  const std::string message = thrown_by(comm, differs);
  if (comm.size() == 1) {
    CHECK(message.empty());
  } else {
    const std::vector<std::string> all = comm.allgather(message);
    bool ok = message.find("read other parameters than rank 0") != std::string::npos &&
              message.find("rank(s) 1") != std::string::npos &&
              message.find("differs0.tuning") != std::string::npos;  // rank 0's path, on every rank
    for (const auto& t : all) ok = ok && t == all[0];
    INFO(message);
    REQUIRE(all_ranks(ok));
  }
}
