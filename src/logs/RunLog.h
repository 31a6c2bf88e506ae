// The run directory's writers (docs/run-directory.md): config.json and metrics.csv and
// summary.json from rank 0, rank-<r>.jsonl from every rank, and the same figures as
// TensorBoard event files when asked for (TensorBoardLog).
#pragma once

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "common/Json.h"

namespace ringtrain {

class TensorBoardLog;

struct EpochMetrics {
  int epoch = 0;                 // completed epochs, 1-based
  std::int64_t step = 0;         // global optimizer step
  double lr = 0.0;
  double train_loss = 0.0;
  double train_accuracy = 0.0;
  double test_loss = 0.0;        // NaN when not evaluated this epoch
  double test_accuracy = 0.0;
  double elapsed_s = 0.0;
  double images_per_s = 0.0;
};

class RunLog {
 public:
  // Creates dir if needed. Rank 0 (is_root) also owns the shared files. append: keep
  // existing files (a resumed run) instead of truncating them.
  RunLog(const std::filesystem::path& dir, int rank, bool is_root, bool append);
  ~RunLog();
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;

  const std::filesystem::path& dir() const noexcept { return dir_; }

  // From now on also write <dir>/tensorboard/ (TensorBoardLog.h); world: the number of
  // ranks, for global images/s.
  void open_tensorboard(int world);

  // Every write throws std::runtime_error naming the file when it fails (a full disk):
  // a run never goes on with logs that silently stopped.
  // One JSON object as one line of rank-<r>.jsonl.
  void record(const Json& line);
  void metrics(const EpochMetrics& m);
  void write_json(const std::string& file_name, const Json& value) const;  // root only
  void write_text(const std::string& file_name, const std::string& text) const;  // root only
  void flush();

 private:
  std::filesystem::path dir_;
  int rank_;
  bool is_root_;
  bool append_;
  std::filesystem::path rank_path_;
  std::filesystem::path metrics_path_;
  std::FILE* rank_file_ = nullptr;
  std::FILE* metrics_file_ = nullptr;
  std::unique_ptr<TensorBoardLog> tensorboard_;
};

}  // namespace ringtrain
