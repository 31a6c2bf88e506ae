// What goes into each TensorBoard run, read off the records RunLog writes anyway so the
// trainer has one place to report to.
#include "tensorboard/TensorBoardLog.h"

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "logs/RunLog.h"

namespace ringtrain {
namespace {

void remove_old_event_files(const std::filesystem::path& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) {
      std::filesystem::remove(entry.path(), ec);
    }
  }
}

std::unique_ptr<EventFile> open_run(const std::filesystem::path& dir, bool append) {
  if (!append) remove_old_event_files(dir);
  return std::make_unique<EventFile>(dir);
}

double number(const Json& rec, std::string_view key) {
  const Json* v = rec.find(key);
  return v != nullptr && v->is_number() ? v->as_double() : std::nan("");
}

// Scalars with a value: NaN marks "not measured" (no evaluation this epoch).
void write_finite(EventFile& file, std::int64_t step, std::vector<Scalar> scalars) {
  std::erase_if(scalars, [](const Scalar& s) { return !std::isfinite(s.value); });
  if (!scalars.empty()) file.write_scalars(step, scalars, EventFile::now());
}

}  // namespace

TensorBoardLog::TensorBoardLog(const std::filesystem::path& run_dir, int rank, int world, bool append)
    : world_(world) {
  const auto root = run_dir / "tensorboard";
  if (rank == 0) {
    epoch_ = open_run(root / "epoch", append);
    step_ = open_run(root / "step", append);
  }
  rank_ = open_run(root / fmt::format("rank-{}", rank), append);
}

TensorBoardLog::~TensorBoardLog() = default;

void TensorBoardLog::text(std::string_view tag, std::string_view markdown) {
  if (epoch_) epoch_->write_text(0, tag, markdown, EventFile::now());
}

void TensorBoardLog::record(const Json& rec) {
  const Json* type = rec.find("type");
  if (type == nullptr || !type->is_string()) return;
  if (type->as_string() == "step") step_record(rec);
  if (type->as_string() == "resource") resource_record(rec);
}

void TensorBoardLog::step_record(const Json& rec) {
  last_step_ = rec.at("step").as_int();
  // The record's own time: its phases one after the other. Communication counts with its
  // exposed part, the rest ran beside backward (--overlap); wait is inside allreduce.
  // Shares of it are comparable across ranks and log intervals, unlike seconds per record.
  const double data = number(rec, "data_s"), forward = number(rec, "forward_s"),
               backward = number(rec, "backward_s"), allreduce = number(rec, "allreduce_s"),
               wait = number(rec, "wait_s"), optimizer = number(rec, "optimizer_s"),
               checkpoint = number(rec, "checkpoint_s");
  const double logged_exposed = number(rec, "exposed_comm_s");
  const double exposed = std::isfinite(logged_exposed) ? logged_exposed : allreduce;
  const double total = data + forward + backward + exposed + optimizer + checkpoint;
  const double steps = std::max(number(rec, "steps"), 1.0);
  if (total > 0.0) {
    write_finite(*rank_, last_step_,
                 {{"time/data", data / total},
                  {"time/forward", forward / total},
                  {"time/backward", backward / total},
                  {"time/allreduce", allreduce / total},
                  {"time/exposed_comm", exposed / total},
                  {"time/wait", wait / total},
                  {"time/optimizer", optimizer / total},
                  {"time/checkpoint", checkpoint / total},
                  {"time/step_seconds", total / steps}});
  }
  if (step_) {
    // Every rank trains on an equal batch, so rank 0's images times the ranks is the global
    // count, as in metrics.csv's images_per_s.
    const double images_per_s = total > 0.0 ? number(rec, "images") * world_ / total : std::nan("");
    write_finite(*step_, last_step_,
                 {{"train/loss", number(rec, "loss")},
                  {"train/accuracy", number(rec, "accuracy")},
                  {"lr", number(rec, "lr")},
                  {"images_per_s", images_per_s}});
  }
}

void TensorBoardLog::resource_record(const Json& rec) {
  const Json* step = rec.find("step");
  const std::int64_t at = step != nullptr && step->is_number() ? step->as_int() : last_step_;
  write_finite(*rank_, at,
               {{"resource/cpu_percent", number(rec, "cpu_percent")},
                {"resource/rss_mb", number(rec, "rss_mb")},
                {"resource/net_send_mbps", number(rec, "net_send_mbps")},
                {"resource/net_recv_mbps", number(rec, "net_recv_mbps")},
                {"resource/wait_share", number(rec, "wait_share")}});
}

void TensorBoardLog::metrics(const EpochMetrics& m) {
  if (!epoch_) return;
  write_finite(*epoch_, m.step,
               {{"train/loss", m.train_loss},
                {"train/accuracy", m.train_accuracy},
                {"test/loss", m.test_loss},
                {"test/accuracy", m.test_accuracy},
                {"lr", m.lr},
                {"images_per_s", m.images_per_s}});
  epoch_->flush();
}

void TensorBoardLog::flush() {
  for (EventFile* f : {epoch_.get(), step_.get(), rank_.get()}) {
    if (f != nullptr) f->flush();
  }
}

}  // namespace ringtrain
