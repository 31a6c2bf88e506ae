// The run's TensorBoard scalars, laid out as TensorBoard runs under <run-dir>/tensorboard/
// (docs/run-directory.md): epoch/ and step/ from rank 0, rank-<r>/ from every rank. The
// same tag in two runs is one chart with a line per run: train/loss per epoch against per
// log record, time/allreduce of rank 0 against rank 1.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "common/Json.h"
#include "logs/RunLog.h"
#include "tensorboard/EventFile.h"

namespace ringtrain {

// A RunLog sink: add it to the run's log (RunLog::add_sink) and it follows every record.
class TensorBoardLog : public RunLogSink {
 public:
  // append: a resumed run adds new event files beside the old ones (TensorBoard reads them
  // as one run); otherwise this rank's earlier event files in its directories are removed,
  // as metrics.csv is truncated.
  TensorBoardLog(const std::filesystem::path& run_dir, int rank, int world, bool append);
  ~TensorBoardLog() override;

  // A rank-<r>.jsonl record; "step" and "resource" records carry scalars, others none.
  void record(const Json& rec) override;
  // A metrics.csv row (rank 0).
  void metrics(const EpochMetrics& m) override;
  void flush() override;
  // Rank 0: a text summary (markdown) at step 0 of the epoch/ run, e.g. the run's settings.
  void text(std::string_view tag, std::string_view markdown);

 private:
  void step_record(const Json& rec);
  void resource_record(const Json& rec);

  int world_;
  std::int64_t last_step_ = 0;
  std::unique_ptr<EventFile> epoch_;  // rank 0 only
  std::unique_ptr<EventFile> step_;   // rank 0 only
  std::unique_ptr<EventFile> rank_;
};

}  // namespace ringtrain
