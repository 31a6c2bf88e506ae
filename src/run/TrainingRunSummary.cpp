// TrainingRun's records of the run as a whole: resource records, and the parts of
// summary.json every run has (each rank's common figures, gathered on every rank; the head).
#include "run/TrainingRun.h"

#include <algorithm>

namespace ringtrain {

Json TrainingRun::resource_record(const ResourceSample& sample, std::uint64_t bytes_sent, std::uint64_t bytes_received,
                                  double dt) const {
  return Json(Json::Object{{"type", "resource"},
                           {"t", elapsed()},
                           {"cpu_percent", sample.cpu_percent},
                           {"rss_mb", sample.rss_mb},
                           {"peak_rss_mb", sample.peak_rss_mb},
                           {"net_send_mbps", static_cast<double>(bytes_sent) / 1e6 / dt},
                           {"net_recv_mbps", static_cast<double>(bytes_received) / 1e6 / dt}});
}

std::vector<double> TrainingRun::common_row(PhaseTimes phases, std::uint64_t bytes_sent, std::uint64_t bytes_received) {
  const ResourceSample rs = monitor.sample();
  phases.checkpoint = checkpoint_seconds;
  phases.eval = eval_seconds;
  return {result.wall_s,
          phases.data,
          phases.forward,
          phases.backward,
          phases.allreduce,
          phases.exposed,
          phases.wait,
          phases.optimizer,
          phases.checkpoint,
          phases.eval,
          std::max(monitor.peak_rss_mb(), rs.peak_rss_mb),
          monitor.mean_cpu_percent(),
          static_cast<double>(bytes_sent) / 1e6,
          static_cast<double>(bytes_received) / 1e6};
}

Json TrainingRun::common_rank_json(int r, const double* row, double images) const {
  Json rj = Json::object();
  rj.set("rank", r);
  rj.set("host", hosts[static_cast<std::size_t>(r)]);
  rj.set("wall_s", row[0]);
  rj.set("images_per_s", row[0] > 0 ? images / row[0] : 0.0);
  const PhaseTimes p{.data = row[1], .forward = row[2], .backward = row[3], .allreduce = row[4], .exposed = row[5],
                     .wait = row[6], .optimizer = row[7], .checkpoint = row[8], .eval = row[9]};
  rj.set("phases_s", p.to_json());
  rj.set("peak_rss_mb", row[10]);
  rj.set("mean_cpu_percent", row[11]);
  rj.set("mb_sent", row[12]);
  rj.set("mb_received", row[13]);
  return rj;
}

Json TrainingRun::summary_head(double images) const {
  Json j = Json::object();
  j.set("model", config.model);
  j.set("dataset", config.data.name);
  j.set("mode", config.mode);
  j.set("world_size", world);
  j.set("batch_size", config.batch_size);
  j.set("precision", config.precision);
  j.set("threads_per_rank", threads_.threads);
  j.set("wall_s", result.wall_s);
  j.set("images_per_s", result.wall_s > 0 ? images / result.wall_s : 0.0);
  j.set("final_train_loss", result.final_train_loss);
  j.set("final_test_loss", result.final_test_loss);
  j.set("final_test_accuracy", result.final_test_accuracy);
  j.set("epochs_completed", result.epochs_completed);
  j.set("steps", result.steps);
  j.set("time_to_target_s", result.time_to_target_s ? Json(*result.time_to_target_s) : Json());
  j.set("target_accuracy", config.target_accuracy);
  j.set("stopped_by", result.stopped_by);
  j.set("last_checkpoint", result.last_checkpoint.string());
  j.set("model_file", result.model.string());
  return j;
}

std::vector<double> TrainingRun::gather_rows(const std::vector<double>& mine) {
  const std::size_t width = mine.size();
  std::vector<double> all(width * static_cast<std::size_t>(comm.size()), 0.0);
  std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(width * static_cast<std::size_t>(comm.rank())));
  comm.allreduce_sum(all);
  return all;
}

}  // namespace ringtrain
