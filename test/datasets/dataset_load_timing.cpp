// Hand-run timing of the dataset layer (not a ctest): loads Fashion-MNIST from .gz, writes
// and loads a CIFAR-10-sized binary set, and times load_batch. Usage:
//   dataset_load_timing [fashion-mnist-dir] [scratch-dir]
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/Random.h"
#include "datasets/Dataset.h"
#include "datasets/DatasetReport.h"

using namespace ringtrain;
using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

static void time_batches(const Dataset& d, std::uint64_t key, const char* what) {
  const std::size_t batch = 64;
  std::vector<float> dst(batch * d.shape().numel());
  std::vector<std::int32_t> labels(batch);
  std::vector<std::size_t> idx(batch);
  const int reps = 2000;
  Rng rng(7);
  auto t0 = Clock::now();
  for (int r = 0; r < reps; ++r) {
    for (auto& i : idx) i = rng.below(d.size());
    load_batch(d, idx, dst.data(), labels.data(), key);
  }
  std::printf("load_batch %s: 64 samples of %s in %.1f us (mean of %d)\n", what, d.shape().str().c_str(),
              seconds_since(t0) / reps * 1e6, reps);
}

int main(int argc, char** argv) {
  const std::string fmnist_dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
  const std::string scratch = argc > 2 ? argv[2] : "/tmp/ringtrain-cifar-timing";

  DatasetConfig fm;
  fm.name = "fashion-mnist";
  fm.data_dir = fmnist_dir;
  auto t0 = Clock::now();
  auto fsplits = load_dataset(fm);
  std::printf("fashion-mnist load (%zu + %zu from .gz, incl. normalisation stats): %.3f s\n", fsplits.train->size(),
              fsplits.test->size(), seconds_since(t0));
  time_batches(*fsplits.train, 0, "fashion-mnist, no augmentation");

  // A CIFAR-10-sized binary set: 5 x 10000 + 10000 records of random bytes, labels < 10.
  const auto dir = std::filesystem::path(scratch) / "cifar-10-batches-bin";
  std::filesystem::create_directories(dir);
  Rng rng(1);
  std::vector<unsigned char> rec(10000 * 3073);
  auto write_batch = [&](const std::string& name) {
    for (std::size_t r = 0; r < 10000; ++r) {
      rec[r * 3073] = static_cast<unsigned char>(rng.below(10));
      for (std::size_t k = 1; k < 3073; ++k) rec[r * 3073 + k] = static_cast<unsigned char>(rng.next() >> 56);
    }
    std::ofstream((dir / name).string(), std::ios::binary).write(reinterpret_cast<const char*>(rec.data()), rec.size());
  };
  for (int b = 1; b <= 5; ++b) write_batch(fmt::format("data_batch_{}.bin", b));
  write_batch("test_batch.bin");
  DatasetConfig cf;
  cf.name = "cifar10";
  cf.data_dir = scratch;
  cf.augment = true;
  t0 = Clock::now();
  auto csplits = load_dataset(cf);
  std::printf("cifar10-sized binary load (%zu + %zu records, incl. normalisation stats): %.3f s\n", csplits.train->size(),
              csplits.test->size(), seconds_since(t0));
  time_batches(*csplits.train, 0, "cifar10, augmentation off (key 0)");
  time_batches(*csplits.train, 12345, "cifar10, crop+flip");

  if (argc > 3) std::fputs(format_dataset_report(describe_dataset("fashion-mnist", fsplits)).c_str(), stdout);
  return 0;
}
