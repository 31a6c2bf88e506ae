// The pieces of a training run that Trainer and AsyncTrainer share (see TrainerShared.h).
#include "run/TrainerShared.h"

#include <cmath>
#include <ctime>

#include <fmt/format.h>

#include "common/CollectiveError.h"
#include "nn/Model.h"
#include "checkpoint/CheckpointIo.h"
#include "run/Versions.h"

namespace ringtrain {
namespace {

// FNV-1a 64, for configuration fingerprints.
std::uint64_t fingerprint64(std::string_view text) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace

std::string default_run_dir(const std::string& model, int world, std::string_view suffix) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return fmt::format("runs/{}-{}-np{}{}", stamp, model, world, suffix);
}

void check_configuration_agrees(Communicator& comm, const TrainConfig& config, const Model& model) {
  const std::string text = config.fingerprint_text() + "\n" + model.signature();
  const std::vector<std::uint64_t> all = comm.allgather(fingerprint64(text));
  std::vector<int> differ;
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    if (all[static_cast<std::size_t>(r)] != all[0]) differ.push_back(r);
  }
  if (!differ.empty()) {
    throw CollectiveError(fmt::format(
        "configuration or model differs across ranks: rank(s) {} disagree with rank 0 (every rank must get the "
        "same flags and data shape)",
        fmt::join(differ, ", ")));
  }
}

Json base_config_json(const TrainConfig& config, int world, const std::vector<std::string>& hosts,
                      const DatasetSplits& data, const Model& model, const std::filesystem::path& checkpoint_dir,
                      const std::string& versions) {
  Json j = config.to_json();
  j.set("batch_size", config.batch_size);
  j.set("lr_effective", config.schedule.base_lr);
  j.set("eval_batch_size", config.eval_batch_size);
  j.set("world_size", world);
  Json hs = Json::array();
  for (const auto& h : hosts) hs.push(h);
  j.set("hosts", std::move(hs));
  j.set("threads_per_rank", threads_per_rank());
  j.set("input_shape", data.train->shape().str());
  j.set("classes", data.train->classes());
  j.set("train_samples", data.train->size());
  j.set("test_samples", data.test->size());
  j.set("num_params", model.num_params());
  j.set("flops_per_image", model.flops_per_image());
  j.set("checkpoint_dir", checkpoint_dir.string());
  j.set("versions", Json::parse(versions));
  return j;
}

std::optional<ResumeCheckpoint> load_resume_checkpoint(Communicator& comm, const std::string& resume,
                                                     const std::filesystem::path& checkpoint_dir, const Model& model) {
  if (resume.empty()) return std::nullopt;
  std::filesystem::path path = resume;
  if (resume == "auto") {
    path = Checkpoint::latest_in(checkpoint_dir);
    // Rank 0's directory listing decides for everyone.
    if (broadcast_string(comm, path.string(), 0).empty()) {
      if (comm.rank() == 0) fmt::print("ringtrain: no checkpoint in {}; starting fresh\n", checkpoint_dir.string());
      return std::nullopt;
    }
  }
  ResumeCheckpoint r{load_checkpoint_collective(comm, path), path};
  check_checkpoint_matches(r.data, model, path.string());
  return r;
}

void check_checkpoint_optimizer(const CheckpointData& ck, const std::string& name, std::size_t state_size,
                                const std::string& source) {
  const std::string saved = ck.meta.at("optimizer").as_string();
  if (ck.optimizer_state.size() != state_size || saved != name) {
    throw CollectiveError(fmt::format(
        "{}: optimizer: the checkpoint holds {} state for '{}', this run uses '{}' with {} (pass the same "
        "--optimizer)",
        source, ck.optimizer_state.size(), saved, name, state_size));
  }
}

Json checkpoint_meta(const TrainConfig& config, const Model& model, int world, const CheckpointPoint& point) {
  Json meta = Json::object();
  meta.set("format_version", Checkpoint::kFormatVersion);
  meta.set("model", config.model);
  meta.set("signature", model.signature());
  meta.set("input_shape", model.input_shape().str());
  meta.set("classes", model.classes());
  meta.set("num_params", model.num_params());
  meta.set("world_size", world);
  meta.set("batch_size", config.batch_size);
  meta.set("global_step", point.at.global_step);
  meta.set("epoch", point.at.epoch);
  meta.set("step_in_epoch", point.at.step_in_epoch);
  meta.set("elapsed_s", point.elapsed_s);
  meta.set("epoch_loss_sum", point.totals.loss_sum);
  meta.set("epoch_correct", point.totals.correct);
  meta.set("epoch_count", point.totals.count);
  meta.set("epoch_seconds", point.totals.seconds);
  meta.set("seed", config.seed);
  meta.set("rng", "counter-based: every stream is derived from (seed, purpose, epoch, step)");
  meta.set("optimizer", point.optimizer);
  meta.set("optimizer_steps", point.optimizer_steps);
  meta.set("lr", point.lr);
  meta.set("test_accuracy", point.test_accuracy);
  meta.set("config", config.to_json());
  return meta;
}

std::filesystem::path write_checkpoint(const CheckpointData& ck, const TrainConfig& config,
                                       const std::filesystem::path& checkpoint_dir, const LoopPosition& at,
                                       RunLog& log, const std::function<double()>& elapsed,
                                       std::chrono::steady_clock::time_point started) {
  const auto bytes = Checkpoint::serialize(ck);
  const std::filesystem::path path = checkpoint_dir / Checkpoint::file_name(at.global_step);
  Checkpoint::write(path, bytes);
  Checkpoint::prune(checkpoint_dir, config.keep_checkpoints);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  Json rec = Json::object();
  rec.set("type", "checkpoint");
  rec.set("t", elapsed());
  rec.set("epoch", at.epoch);
  rec.set("step", at.global_step);
  rec.set("seconds", seconds);
  rec.set("bytes", bytes.size());
  rec.set("path", path.string());
  log.record(rec);
  return path;
}

Json eval_record(double t, int epoch, std::int64_t step, double test_loss, double test_accuracy, double seconds) {
  return Json(Json::Object{{"type", "eval"}, {"t", t}, {"epoch", epoch}, {"step", step}, {"test_loss", test_loss},
                           {"test_accuracy", test_accuracy}, {"seconds", seconds}});
}

Json resource_record(double t, const ResourceSample& sample, std::uint64_t bytes_sent, std::uint64_t bytes_received,
                     double dt) {
  return Json(Json::Object{{"type", "resource"},
                           {"t", t},
                           {"cpu_percent", sample.cpu_percent},
                           {"rss_mb", sample.rss_mb},
                           {"peak_rss_mb", sample.peak_rss_mb},
                           {"net_send_mbps", static_cast<double>(bytes_sent) / 1e6 / dt},
                           {"net_recv_mbps", static_cast<double>(bytes_received) / 1e6 / dt}});
}

std::string epoch_line(const EpochMetrics& m, int epochs, double seconds) {
  return fmt::format("epoch {:>3}/{}  train loss {:.4f} acc {:.4f}  test loss {} acc {}  {:.1f}s  {:.0f} img/s",
                     m.epoch, epochs, m.train_loss, m.train_accuracy,
                     std::isnan(m.test_loss) ? "-" : fmt::format("{:.4f}", m.test_loss),
                     std::isnan(m.test_accuracy) ? "-" : fmt::format("{:.4f}", m.test_accuracy), seconds,
                     m.images_per_s);
}

std::vector<double> gather_rows(Communicator& comm, const std::vector<double>& mine) {
  const std::size_t width = mine.size();
  std::vector<double> all(width * static_cast<std::size_t>(comm.size()), 0.0);
  std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(width * static_cast<std::size_t>(comm.rank())));
  comm.allreduce_sum(all);
  return all;
}

void set_result_fields(Json& summary, const TrainResult& result, const TrainConfig& config) {
  summary.set("final_train_loss", result.final_train_loss);
  summary.set("final_test_loss", result.final_test_loss);
  summary.set("final_test_accuracy", result.final_test_accuracy);
  summary.set("epochs_completed", result.epochs_completed);
  summary.set("steps", result.steps);
  summary.set("time_to_target_s", result.time_to_target_s ? Json(*result.time_to_target_s) : Json());
  summary.set("target_accuracy", config.target_accuracy);
  summary.set("stopped_by", result.stopped_by);
  summary.set("last_checkpoint", result.last_checkpoint.string());
}

}  // namespace ringtrain
