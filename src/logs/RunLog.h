// The run directory's writers (docs/run-directory.md): config.json and metrics.csv and
// summary.json from rank 0, rank-<r>.jsonl from every rank, and every record passed on to
// the sinks the run adds (TensorBoard's event files: tensorboard/TensorBoardLog.h).
#pragma once

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/Json.h"

namespace ringtrain {

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

// Another destination for the run's records (TensorBoard's event files), so that the run
// log does not depend on the formats it feeds. Errors throw as RunLog's own writes do.
class RunLogSink {
 public:
  virtual ~RunLogSink() = default;
  virtual void record(const Json& rec) = 0;         // a rank-<r>.jsonl record
  virtual void metrics(const EpochMetrics& m) = 0;  // a metrics.csv row (rank 0)
  virtual void flush() = 0;
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

  // True when the run continues one whose files this log appends to (a resume).
  bool appending() const noexcept { return append_; }

  // From now on every record and metrics row also goes to sink.
  void add_sink(std::unique_ptr<RunLogSink> sink);

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
  std::vector<std::unique_ptr<RunLogSink>> sinks_;
};

}  // namespace ringtrain
