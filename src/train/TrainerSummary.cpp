// What a synchronous run writes about itself besides what every run writes (TrainingRun):
// step records (phases, traffic, the last step's communication) and resource records in
// rank-<r>.jsonl, and summary.json's all-reduce fields.
#include <algorithm>

#include "train/TrainerState.h"

namespace ringtrain {

void Trainer::State::log_step(const StepResult& r, double lr, bool flush) {
  pending.times += r.times;
  ++pending.steps;
  pending.loss += r.totals.loss_sum / r.totals.count;
  pending.accuracy += r.totals.correct / r.totals.count;
  pending.lr = lr;
  if (flush || pending.steps >= config.log_every) flush_steps();
}

void Trainer::State::flush_steps() {
  if (pending.steps == 0) return;
  const PhaseTimes& t = pending.times;
  const double now = elapsed();
  Json rec = Json::object();
  rec.set("type", "step");
  rec.set("t", now);
  rec.set("epoch", pos.epoch + 1);
  rec.set("step", pos.global_step);
  rec.set("steps", pending.steps);
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
  rec.set("loss", pending.loss / pending.steps);
  rec.set("accuracy", pending.accuracy / pending.steps);
  rec.set("lr", pending.lr);
  rec.set("images", static_cast<std::int64_t>(pending.steps) * (global_batch() / world));
  // The last step's operations, (start, end) in seconds before this record's t: the trace's
  // communication row.
  if (!pending.slices.empty()) {
    Json slices = Json::array();
    for (const auto& [start, end] : pending.slices) slices.push(Json(Json::Array{Json(start - now), Json(end - now)}));
    rec.set("comm_slices", std::move(slices));
  }
  log->record(rec);
  totals += pending.times;
  pending = {};
}

void Trainer::State::maybe_record_resources() {
  const double dt = std::chrono::duration<double>(Clock::now() - last_resource.time).count();
  if (dt < 1.0) return;
  const ResourceSample rs = monitor.sample();
  const ResourceMark now{Clock::now(), comm.bytes_sent(), comm.bytes_received(), comm.wait_seconds()};
  Json rec = resource_record(rs, now.sent - last_resource.sent, now.received - last_resource.received, dt);
  rec.set("step", pos.global_step);
  rec.set("wait_share", (now.wait - last_resource.wait) / dt);
  log->record(rec);
  // Once a second the logs reach the file, so `tail -f rank-<r>.jsonl` follows a live run.
  log->flush();
  last_resource = now;
}

void Trainer::State::write_summary() {
  // Each rank's own figures, gathered to every rank as fixed-size rows.
  const double images = static_cast<double>(result.steps) * (global_batch() / world);  // this rank's
  const std::vector<double> all = gather_rows(common_row(totals, comm.bytes_sent(), comm.bytes_received()));
  if (!root()) return;
  Json j = summary_head(images * world);
  j.set("global_batch_size", global_batch());
  j.set("allreduce", config.allreduce);
  if (config.logical_shards > 0) j.set("logical_shards", config.logical_shards);
  Json ranks = Json::array();
  for (int r = 0; r < world; ++r) {
    const double* row = all.data() + kCommonRowWidth * static_cast<std::size_t>(r);
    Json rj = common_rank_json(r, row, images);
    const double allreduce = row[4], exposed = row[5];
    rj.set("hidden_comm_share", allreduce > 0 ? 1.0 - exposed / allreduce : 0.0);
    ranks.push(std::move(rj));
  }
  j.set("ranks", std::move(ranks));
  log->write_json("summary.json", j);
}

}  // namespace ringtrain
