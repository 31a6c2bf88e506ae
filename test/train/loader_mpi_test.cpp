// Image folders through the whole trainer under mpirun (np 1, 2):
// - the same weights after N steps with 0 (inline), 1, 2 and 4 loader threads, and the same
//   evaluation;
// - a mid-epoch resume with loader threads ends on the uninterrupted run's bits;
// - a Fashion-MNIST slice as PNG files trains to the same bits as the same slice as IDX;
// - a bad image mid-epoch ends every rank with an error (no hang), or is skipped and listed.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "collectives/MpiCommunicator.h"
#include "common/Json.h"
#include "datasets/ImageDataset.h"
#include "datasets/dataset_test_util.h"
#include "datasets/folder_test_util.h"
#include "support/mpi_test_util.h"
#include "support/trainer_test_util.h"
#include "nn/Model.h"
#include "run/Evaluate.h"
#include "train/Trainer.h"

using namespace ringtrain;
using namespace ringtrain::test;
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kTrain = 192;
constexpr std::size_t kVal = 48;

// Rank 0 writes the first kTrain/kVal Fashion-MNIST samples as DIR/png/{train,val}/<label>/
// and, in the folder's order (label, then index), as IDX files in DIR/idx; the others wait.
fs::path fashion_folder() {
  const fs::path dir = job_dir() / "loader_fashion";
  if (world_rank() == 0 && !fs::exists(dir / "idx")) {
    const DatasetSplits fm = load_dataset(DatasetConfig{});
    const auto write_idx = [&](const ImageDataset& ref, const std::string& prefix) {
      const Bytes pixels(ref.pixels().begin(), ref.pixels().end());
      const Bytes labels(ref.labels().begin(), ref.labels().end());
      write_file((dir / "idx" / (prefix + "-images-idx3-ubyte")).string(),
                 idx_images(static_cast<std::uint32_t>(ref.size()), 28, 28, pixels));
      write_file((dir / "idx" / (prefix + "-labels-idx1-ubyte")).string(), idx_labels(labels));
    };
    write_idx(export_as_png(dynamic_cast<const ImageDataset&>(*fm.train), kTrain, dir / "png", "train"), "train");
    write_idx(export_as_png(dynamic_cast<const ImageDataset&>(*fm.test), kVal, dir / "png", "val"), "t10k");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

TrainConfig folder_config(const std::string& tag, const fs::path& data_dir) {
  TrainConfig c = small_config(tag, 16);
  c.model = "lenet5";
  c.data = DatasetConfig{};
  c.data.name = "folder";
  c.data.data_dir = data_dir.string();
  c.max_steps = 9;
  c.epochs = 3;
  c.run_dir = (job_dir() / fmt::format("loader_{}_np{}", tag, world_size())).string();
  return c;
}

std::vector<float> train(const TrainConfig& c, std::string* error = nullptr) {
  MpiCommunicator world(MPI_COMM_WORLD);
  try {
    Trainer t(c, world);
    t.run();
    return copy_params(t);
  } catch (const std::exception& e) {
    if (error == nullptr) throw;
    *error = e.what();
    return {};
  }
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return !a.empty() && a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("Random-resized crops: the same weights with 0, 1, 2 and 4 loader threads", "[loader]") {
  const fs::path dir = fashion_folder() / "png";
  TrainConfig c = folder_config("threads", dir);
  c.data.crop.size = 24;
  c.data.crop.scale_min = 0.35;
  c.loader_threads = 0;
  c.prefetch = 2;
  const std::vector<float> inline_bits = train(c);
  for (int threads : {1, 2, 4}) {
    c.loader_threads = threads;
    c.run_dir = folder_config(fmt::format("threads{}", threads), dir).run_dir;
    INFO(threads << " loader threads");
    CHECK(all_ranks(same_bits(train(c), inline_bits)));
  }
}

TEST_CASE("Evaluation of centre crops: the same loss and accuracy with and without loader threads", "[loader]") {
  DatasetConfig data = folder_config("eval", fashion_folder() / "png").data;
  data.crop.size = 24;
  const DatasetSplits splits = load_dataset(data);
  Model model("lenet5", splits.test->shape(), splits.test->classes());
  MpiCommunicator world(MPI_COMM_WORLD);
  const EvalResult inline_result = evaluate_model(world, model, *splits.test, 7, 0);
  const EvalResult threaded = evaluate_model(world, model, *splits.test, 7, 3);
  CHECK(inline_result.samples == kVal);
  CHECK(all_ranks(threaded.loss == inline_result.loss && threaded.accuracy == inline_result.accuracy));
}

TEST_CASE("A mid-epoch resume with loader threads ends on the uninterrupted run's bits", "[loader]") {
  const fs::path dir = fashion_folder() / "png";
  TrainConfig whole = folder_config("resume_whole", dir);
  whole.data.crop.size = 20;
  whole.loader_threads = 2;
  whole.max_steps = 10;
  const std::vector<float> expected = train(whole);
  TrainConfig first = whole;
  first.run_dir = folder_config("resume_first", dir).run_dir;
  first.max_steps = 4;
  first.checkpoint_every_steps = 4;
  train(first);
  TrainConfig rest = whole;
  rest.run_dir = folder_config("resume_rest", dir).run_dir;
  rest.resume = (fs::path(first.run_dir) / "checkpoints" / "ckpt-000000004.rtck").string();
  rest.loader_threads = 3;  // a different count: the bits must not care
  CHECK(all_ranks(same_bits(train(rest), expected)));
}

TEST_CASE("A Fashion-MNIST slice as PNG files trains to the IDX files' bits", "[loader]") {
  const fs::path dir = fashion_folder();
  TrainConfig png = folder_config("fashion_png", dir / "png");
  png.data.augment = true;
  png.loader_threads = 2;
  TrainConfig idx = folder_config("fashion_idx", dir / "idx");
  idx.data.name = "mnist";
  idx.data.augment = true;
  CHECK(all_ranks(same_bits(train(png), train(idx))));
}

TEST_CASE("A bad image mid-epoch ends every rank with an error, or is skipped and listed", "[loader]") {
  const fs::path dir = job_dir() / "loader_bad";
  if (world_rank() == 0) {
    make_ramp_folder(dir, "train", 2, 16, 28, 28, 1);
    make_ramp_folder(dir, "val", 2, 2, 28, 28, 1);
    const ImageBytes good = encode_png(ramp_image(28, 28, 1, 5), 28, 28, SPNG_COLOR_TYPE_GRAYSCALE, 8);
    write_bytes((dir / "train" / "c1" / "img005.png").string(), ImageBytes(good.begin(), good.end() - 30));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  TrainConfig c = folder_config("bad", dir);
  c.batch_size = 8;
  c.max_steps = 0;  // a whole epoch: every sample is met on some rank
  c.epochs = 1;
  c.loader_threads = 2;
  std::string error;
  CHECK(train(c, &error).empty());
  INFO("rank " << world_rank() << ": " << error);
  CHECK(all_ranks(!error.empty()));
  // Every rank names the file (a gray folder decodes every image for its statistics at start).
  CHECK(all_ranks(error.find("img005.png") != std::string::npos));

  c.data.skip_bad_images = true;
  c.run_dir = folder_config("bad_skip", dir).run_dir;
  CHECK(all_ranks(!train(c).empty()));
  if (world_rank() == 0) {
    std::ifstream in(fs::path(c.run_dir) / "summary.json");
    std::stringstream text;
    text << in.rdbuf();
    const Json summary = Json::parse(text.str());
    CHECK(summary.at("bad_images_skipped").as_int() == 1);
    CHECK(summary.at("bad_images").as_array().at(0).as_string().find("img005.png") != std::string::npos);
    CHECK(summary.at("ranks").as_array().at(0).at("loader_threads").as_int() == 2);
  }
}
