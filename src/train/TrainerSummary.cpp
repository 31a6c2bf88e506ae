// What a training run writes about itself: step, eval and event records in
// rank-<r>.jsonl, and summary.json with every rank's totals.
#include <algorithm>

#include "run/TrainerShared.h"
#include "train/TrainerState.h"

namespace ringtrain {

void Trainer::State::record_steps(const PhaseTimes& t, int steps, double mean_loss, double mean_accuracy, double lr,
                                  std::int64_t images, const std::vector<std::pair<double, double>>& comm_slices) {
  const double now = elapsed();
  Json rec = Json::object();
  rec.set("type", "step");
  rec.set("t", now);
  rec.set("epoch", pos.epoch + 1);
  rec.set("step", pos.global_step);
  rec.set("steps", steps);
  rec.set("data_s", t.data);
  rec.set("forward_s", t.forward);
  rec.set("backward_s", t.backward);
  rec.set("allreduce_s", t.allreduce);
  rec.set("exposed_comm_s", t.exposed);
  rec.set("wait_s", t.wait);
  rec.set("optimizer_s", t.optimizer);
  rec.set("checkpoint_s", t.checkpoint);
  rec.set("bytes_sent", comm.bytes_sent());
  rec.set("bytes_received", comm.bytes_received());
  rec.set("loss", mean_loss);
  rec.set("accuracy", mean_accuracy);
  rec.set("lr", lr);
  rec.set("images", images);
  // The last step's operations, (start, end) in seconds before this record's t: the trace's
  // communication row.
  if (!comm_slices.empty()) {
    Json slices = Json::array();
    for (const auto& [start, end] : comm_slices) {
      Json pair = Json::array();
      pair.push(start - now);
      pair.push(end - now);
      slices.push(std::move(pair));
    }
    rec.set("comm_slices", std::move(slices));
  }
  log->record(rec);
}

void Trainer::State::record_eval(double seconds) {
  log->record(eval_record(elapsed(), pos.epoch + 1, pos.global_step, last_test_loss, last_test_accuracy, seconds));
}

void Trainer::State::record_event(const std::string& message) {
  Json rec = Json::object();
  rec.set("type", "event");
  rec.set("t", elapsed());
  rec.set("message", message);
  log->record(rec);
}

void Trainer::State::maybe_record_resources() {
  const double dt = seconds_since(last_resource.time);
  if (dt < 1.0) return;
  const ResourceSample rs = monitor.sample();
  const ResourceMark now{Clock::now(), comm.bytes_sent(), comm.bytes_received(), comm.wait_seconds()};
  Json rec = resource_record(elapsed(), rs, now.sent - last_resource.sent, now.received - last_resource.received, dt);
  rec.set("step", pos.global_step);
  rec.set("wait_share", (now.wait - last_resource.wait) / dt);
  log->record(rec);
  // Once a second the logs reach the file, so `tail -f rank-<r>.jsonl` follows a live run.
  log->flush();
  last_resource = now;
}

void Trainer::State::write_summary(const TrainResult& result) {
  const ResourceSample rs = monitor.sample();
  // Each rank's own figures, gathered to every rank as fixed-size rows.
  const double images = static_cast<double>(result.steps) * config.batch_size * config.accumulate;
  std::vector<double> mine = {result.wall_s,
                              totals.data,
                              totals.forward,
                              totals.backward,
                              totals.allreduce,
                              totals.wait,
                              totals.exposed,
                              totals.optimizer,
                              totals.checkpoint,
                              totals.eval,
                              std::max(monitor.peak_rss_mb(), rs.peak_rss_mb),
                              monitor.mean_cpu_percent(),
                              static_cast<double>(comm.bytes_sent()) / 1e6,
                              static_cast<double>(comm.bytes_received()) / 1e6};
  const std::size_t width = mine.size();
  const std::vector<double> all = gather_rows(comm, mine);
  if (!root()) return;

  Json j = Json::object();
  j.set("model", config.model);
  j.set("dataset", config.data.name);
  j.set("world_size", world);
  j.set("batch_size", config.batch_size);
  j.set("global_batch_size", config.batch_size * world * config.accumulate);
  j.set("allreduce", config.allreduce);
  j.set("wall_s", result.wall_s);
  j.set("images_per_s", result.wall_s > 0 ? images * world / result.wall_s : 0.0);
  set_result_fields(j, result, config);
  Json ranks = Json::array();
  for (int r = 0; r < world; ++r) {
    const double* row = all.data() + width * static_cast<std::size_t>(r);
    Json rj = Json::object();
    rj.set("rank", r);
    rj.set("host", hosts[static_cast<std::size_t>(r)]);
    rj.set("wall_s", row[0]);
    rj.set("images_per_s", row[0] > 0 ? images / row[0] : 0.0);
    PhaseTimes p;
    p.data = row[1];
    p.forward = row[2];
    p.backward = row[3];
    p.allreduce = row[4];
    p.wait = row[5];
    p.exposed = row[6];
    p.optimizer = row[7];
    p.checkpoint = row[8];
    p.eval = row[9];
    rj.set("phases_s", p.to_json());
    rj.set("hidden_comm_share", p.allreduce > 0 ? 1.0 - p.exposed / p.allreduce : 0.0);
    rj.set("peak_rss_mb", row[10]);
    rj.set("mean_cpu_percent", row[11]);
    rj.set("mb_sent", row[12]);
    rj.set("mb_received", row[13]);
    ranks.push(std::move(rj));
  }
  j.set("ranks", std::move(ranks));
  log->write_json("summary.json", j);
}

}  // namespace ringtrain
