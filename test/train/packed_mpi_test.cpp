// Packed shards through the trainer under mpirun (np 1-4):
// - every training sample at most once per epoch across ranks, every rank the same count,
//   fewer than one global batch left out, with --shuffle exact and block, through TrainStep's
//   loader threads;
// - the same weights with 1 and 2 loader threads (JPEG records, random-resized crops), and a
//   mid-epoch resume that ends on the uninterrupted run's bits (block shuffle);
// - a Fashion-MNIST slice packed raw trains to the IDX files' bits;
// - a flipped byte mid-epoch ends every rank with an error (no hang); a missing shard stops
//   every rank at start with the same message.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <functional>
#include <set>

#include <fmt/format.h>

#include "collectives/MpiCommunicator.h"
#include "datasets/ImageDataset.h"
#include "datasets/Packer.h"
#include "datasets/ShardReader.h"
#include "datasets/dataset_test_util.h"
#include "datasets/folder_test_util.h"
#include "step/TrainStep.h"
#include "support/mpi_test_util.h"
#include "support/trainer_test_util.h"
#include "train/Trainer.h"

using namespace ringtrain;
using namespace ringtrain::test;
namespace fs = std::filesystem;

namespace {

// Rank 0 packs once per job: `raw` (203 gray 6x6 records, shards of ~1 KB) and `jpeg` (a
// folder of 20x16 RGB ramps at max side 12), and a Fashion-MNIST slice as IDX and packed.
fs::path packed_data() {
  const fs::path dir = job_dir() / "packed";
  if (world_rank() == 0 && !fs::exists(dir / "fm_packed")) {
    fs::create_directories(dir / "raw");
    for (const char* split : {"train", "val"}) {
      ShardIndex head;
      head.channels = 1;
      head.class_names = {"a", "b", "c"};
      head.norm_mean = {0.5f};
      head.norm_std = {0.3f};
      ShardWriter w((dir / "raw").string(), split, head, 1000);
      for (int i = 0; i < (std::string(split) == "train" ? 203 : 31); ++i) w.add(ramp_image(6, 6, 1, i), i % 3, 6, 6);
      w.finish();
    }
    make_ramp_folder(dir / "folder", "train", 3, 12, 20, 16, 3);
    make_ramp_folder(dir / "folder", "val", 3, 3, 20, 16, 3);
    DatasetConfig folder;
    folder.name = "folder";
    folder.data_dir = (dir / "folder").string();
    PackOptions jpeg;
    jpeg.out = (dir / "jpeg").string();
    jpeg.max_side = 12;
    jpeg.shard_bytes = 4000;
    pack_dataset(folder, jpeg);
    const DatasetSplits fm = load_dataset(DatasetConfig{});
    const auto write_idx = [&](const ImageDataset& ref, std::size_t count, const std::string& prefix) {
      const Bytes pixels(ref.pixels().begin(), ref.pixels().begin() + static_cast<std::ptrdiff_t>(count * 784));
      const Bytes labels(ref.labels().begin(), ref.labels().begin() + static_cast<std::ptrdiff_t>(count));
      write_file((dir / "fm_idx" / (prefix + "-images-idx3-ubyte")).string(),
                 idx_images(static_cast<std::uint32_t>(count), 28, 28, pixels));
      write_file((dir / "fm_idx" / (prefix + "-labels-idx1-ubyte")).string(), idx_labels(labels));
    };
    fs::create_directories(dir / "fm_idx");
    write_idx(dynamic_cast<const ImageDataset&>(*fm.train), 200, "train");
    write_idx(dynamic_cast<const ImageDataset&>(*fm.test), 50, "t10k");
    DatasetConfig idx;
    idx.name = "mnist";
    idx.data_dir = (dir / "fm_idx").string();
    PackOptions raw;
    raw.out = (dir / "fm_packed").string();
    raw.raw = true;
    raw.shard_bytes = 40000;
    pack_dataset(idx, raw);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

// Records which samples the loader threads made.
class RecordingDataset final : public Dataset {
 public:
  explicit RecordingDataset(const Dataset& inner) : inner_(inner) {}
  std::size_t size() const override { return inner_.size(); }
  ImageShape shape() const override { return inner_.shape(); }
  int classes() const override { return inner_.classes(); }
  int label(std::size_t i) const override { return inner_.label(i); }
  void get(std::size_t i, float* dst) const override { get_augmented(i, dst, 0); }
  void get_augmented(std::size_t i, float* dst, std::uint64_t key) const override {
    inner_.get_augmented(i, dst, key);
    const std::lock_guard lock(mutex_);
    seen_.push_back(static_cast<int>(i));
  }
  std::vector<std::size_t> block_starts(std::uint64_t bytes) const override { return inner_.block_starts(bytes); }
  std::vector<std::string> class_names() const override { return inner_.class_names(); }
  std::vector<int> take() {
    const std::lock_guard lock(mutex_);
    return std::exchange(seen_, {});
  }

 private:
  const Dataset& inner_;
  mutable std::mutex mutex_;
  mutable std::vector<int> seen_;
};

std::vector<int> gather(const std::vector<int>& mine) {
  const int n = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(world_size())), displs(counts.size(), 0);
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  for (std::size_t r = 1; r < counts.size(); ++r) displs[r] = displs[r - 1] + counts[r - 1];
  std::vector<int> all(static_cast<std::size_t>(displs.back() + counts.back()));
  MPI_Allgatherv(mine.data(), n, MPI_INT, all.data(), counts.data(), displs.data(), MPI_INT, MPI_COMM_WORLD);
  return all;
}

TrainConfig packed_config(const std::string& tag, const fs::path& data_dir) {
  TrainConfig c = small_config(tag, 8);
  c.model = "logreg";
  c.data = DatasetConfig{};
  c.data.name = "packed";
  c.data.data_dir = data_dir.string();
  c.max_steps = 6;
  c.epochs = 3;
  c.run_dir = (job_dir() / fmt::format("packed_{}_np{}", tag, world_size())).string();
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

TEST_CASE("Every packed sample at most once per epoch, equal shares, with exact and block shuffles", "[packed]") {
  DatasetConfig data = packed_config("once", packed_data() / "raw").data;
  const DatasetSplits splits = load_dataset(data);
  RecordingDataset recording(*splits.train);
  const std::size_t n = splits.train->size();
  for (std::uint64_t block_bytes : {std::uint64_t{0}, std::uint64_t{300}}) {
    INFO((block_bytes > 0 ? "block" : "exact") << " shuffle, np " << world_size());
    Model model("logreg", splits.train->shape(), splits.train->classes());
    TrainStepConfig config;
    config.batch_size = 5;
    config.loader_threads = 2;
    config.shuffle_block_bytes = block_bytes;
    TrainStep step(model, recording, config, world_rank(), world_size());
    const std::size_t global_batch = 5 * static_cast<std::size_t>(world_size());
    CHECK(step.samples_per_epoch() == step.steps_per_epoch() * global_batch);
    CHECK(n - step.samples_per_epoch() < global_batch);
    std::vector<std::set<int>> epochs;
    for (int epoch = 0; epoch < 2; ++epoch) {
      for (std::int64_t s = 0; s < step.steps_per_epoch(); ++s) {
        StepTotals local;
        step.compute_gradients(LoopPosition{epoch, s, s}, local);
      }
      const std::vector<int> mine = recording.take();
      const std::vector<int> all = gather(mine);
      const std::set<int> distinct(all.begin(), all.end());
      CHECK(all_ranks(mine.size() == step.samples_per_epoch() / static_cast<std::size_t>(world_size())));
      CHECK(all.size() == step.samples_per_epoch());
      CHECK(distinct.size() == all.size());  // no sample twice in an epoch
      CHECK(*distinct.rbegin() < static_cast<int>(n));
      epochs.push_back(distinct);
    }
    if (n - step.samples_per_epoch() > 0) CHECK(epochs[0] != epochs[1]);  // another sample left out
  }
}

TEST_CASE("Packed JPEG crops: the same weights with 1 and 2 loader threads; a mid-epoch resume is exact", "[packed]") {
  const fs::path dir = packed_data() / "jpeg";
  TrainConfig c = packed_config("threads1", dir);
  c.data.crop.size = 10;
  c.shuffle = "block";
  c.shuffle_block_mb = 0.002;
  c.batch_size = 4;  // 36 samples: at least 2 steps an epoch at np 4
  c.loader_threads = 1;
  const std::vector<float> one = train(c);
  c.loader_threads = 2;
  c.run_dir = packed_config("threads2", dir).run_dir;
  CHECK(all_ranks(same_bits(train(c), one)));

  TrainConfig first = c;
  first.run_dir = packed_config("resume_first", dir).run_dir;
  first.max_steps = 1;  // mid-epoch at every rank count
  first.checkpoint_every_steps = 1;
  train(first);
  TrainConfig rest = c;
  rest.run_dir = packed_config("resume_rest", dir).run_dir;
  rest.resume = (fs::path(first.run_dir) / "checkpoints" / "ckpt-000000001.rtck").string();
  CHECK(all_ranks(same_bits(train(rest), one)));
}

TEST_CASE("A Fashion-MNIST slice packed raw trains to the IDX files' bits", "[packed]") {
  const fs::path dir = packed_data();
  TrainConfig packed = packed_config("fm_packed", dir / "fm_packed");
  packed.data.augment = true;
  packed.loader_threads = 2;
  packed.eval_every = 1;
  TrainConfig idx = packed_config("fm_idx", dir / "fm_idx");
  idx.data.name = "mnist";
  idx.data.augment = true;
  idx.eval_every = 1;
  CHECK(all_ranks(same_bits(train(packed), train(idx))));
  if (world_rank() == 0) {
    std::ifstream a(fs::path(packed.run_dir) / "summary.json"), b(fs::path(idx.run_dir) / "summary.json");
    std::stringstream ta, tb;
    ta << a.rdbuf();
    tb << b.rdbuf();
    const Json sa = Json::parse(ta.str()), sb = Json::parse(tb.str());
    CHECK(sa.at("final_test_accuracy").as_double() == sb.at("final_test_accuracy").as_double());
    CHECK(sa.at("dropped_per_epoch").as_int() == sb.at("dropped_per_epoch").as_int());
    CHECK(sa.at("train_samples_per_epoch").as_int() + sa.at("dropped_per_epoch").as_int() == 200);
  }
}

TEST_CASE("Packed bad input: a flipped byte mid-epoch ends every rank; a missing shard stops every rank at start",
          "[packed]") {
  const fs::path src = packed_data() / "raw";
  const fs::path dir = job_dir() / fmt::format("packed_bad_np{}", world_size());
  if (world_rank() == 0) {
    fs::create_directories(dir);
    for (const auto& e : fs::directory_iterator(src)) fs::copy_file(e.path(), dir / e.path().filename());
    const ShardReader r(dir.string(), "train");
    std::fstream f(shard_file_path(dir.string(), "train", r.record(100).shard), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(r.record(100).offset + kRecordHeaderBytes + 3));
    f.put('\x7f');
  }
  MPI_Barrier(MPI_COMM_WORLD);
  TrainConfig c = packed_config("bad", dir);
  c.max_steps = 0;  // a whole epoch: record 100 is met on some rank
  c.epochs = 1;
  c.loader_threads = 2;
  std::string error;
  CHECK(train(c, &error).empty());
  INFO("rank " << world_rank() << ": " << error);
  CHECK(all_ranks(!error.empty()));
  // The same line on every rank, naming shard and record.
  CHECK(all_ranks(error.find(".shard: record 100 of train at byte") != std::string::npos &&
                  error.find("checksum mismatch") != std::string::npos));
  const std::uint64_t mine = std::hash<std::string>{}(error);
  std::uint64_t lo = mine, hi = mine;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  CHECK(lo == hi);

  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) fs::remove(shard_file_path(dir.string(), "train", 2));
  MPI_Barrier(MPI_COMM_WORLD);
  error.clear();
  c.run_dir = packed_config("bad_missing", dir).run_dir;
  CHECK(train(c, &error).empty());
  CHECK(all_ranks(error.find("train-00002.shard: cannot open shard") != std::string::npos));
}
