// Training a network read from ONNX under mpirun (np 2): the file with every supported op
// ends with bit-identical parameters on every rank, its checkpoint carries the graph, and a
// resume from it ends on the uninterrupted run's bits.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "collectives/MpiCommunicator.h"
#include "collectives/MpiEnvironment.h"
#include "onnx/OnnxModel.h"
#include "onnx/OnnxReader.h"
#include "run/Evaluate.h"
#include "support/mpi_test_util.h"
#include "support/trainer_test_util.h"
#include "train/Trainer.h"

using namespace ringtrain;
using ringtrain::test::all_ranks;
using ringtrain::test::copy_params;

namespace {

TrainConfig onnx_config(const std::string& tag) {
  TrainConfig c = ringtrain::test::small_config(tag, 8);
  c.model_file = std::string(ONNX_TEST_FILES) + "/all_ops.onnx";
  c.data.synthetic_shape = {3, 12, 12};
  c.data.synthetic_classes = 5;
  c.data.synthetic_train = 128;
  c.data.synthetic_test = 37;
  c.max_steps = 6;
  return c;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Rank 0's values, on every rank.
std::vector<float> rank0s(MpiCommunicator& comm, std::vector<float> v) {
  comm.broadcast(std::span(v), 0);
  return v;
}

}  // namespace

TEST_CASE("A file with every supported op trains with the same bits on every rank") {
  MpiCommunicator world(MPI_COMM_WORLD);
  TrainConfig c = onnx_config("onnx_all_ops");
  c.checkpoint_every_steps = 6;
  Trainer t(c, world);
  t.run();
  const std::vector<float> mine = copy_params(t);
  CHECK(all_ranks(same_bits(mine, rank0s(world, mine))));
  // Trained: not the file's weights any more.
  Model initial = onnx_model(read_onnx(c.model_file));
  const auto p0 = std::as_const(initial).params();
  CHECK(!same_bits(mine, std::vector<float>(p0.begin(), p0.end())));
  // The checkpoint alone rebuilds the model with these parameters.
  const Model loaded = load_model(std::filesystem::path(c.run_dir) / "model.rtck");
  CHECK(loaded.name() == "onnx:all_ops");
  const auto lp = loaded.params();
  CHECK(all_ranks(same_bits(mine, std::vector<float>(lp.begin(), lp.end()))));
}

TEST_CASE("A run from ONNX resumed from its checkpoint ends on the uninterrupted run's bits") {
  MpiCommunicator world(MPI_COMM_WORLD);
  TrainConfig whole = onnx_config("onnx_resume_whole");
  Trainer a(whole, world);
  a.run();
  const std::vector<float> expected = copy_params(a);

  TrainConfig first = onnx_config("onnx_resume_first");
  first.max_steps = 3;
  first.checkpoint_every_steps = 3;
  Trainer b(first, world);
  b.run();
  TrainConfig rest = onnx_config("onnx_resume_rest");
  rest.resume = (std::filesystem::path(first.run_dir) / "checkpoints" / "ckpt-000000003.rtck").string();
  Trainer r(rest, world);
  r.run();
  CHECK(all_ranks(same_bits(copy_params(r), expected)));
}

TEST_CASE("With logical shards the parameters do not depend on the rank count") {
  MpiCommunicator world(MPI_COMM_WORLD);
  TrainConfig c = onnx_config("onnx_shards");
  c.logical_shards = 2;
  Trainer t(c, world);
  t.run();
  const std::vector<float> distributed = copy_params(t);
  std::vector<float> serial;
  if (world.rank() == 0) {
    auto self = make_self_communicator();
    TrainConfig one = onnx_config("onnx_shards_serial");
    one.logical_shards = 2;
    Trainer s(one, *self);
    s.run();
    serial = copy_params(s);
  }
  CHECK(all_ranks(world.rank() != 0 || same_bits(distributed, serial)));
}
