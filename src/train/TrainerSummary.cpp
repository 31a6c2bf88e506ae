// What a synchronous run writes about itself besides what every run writes (TrainingRun):
// step records (phases, traffic, the last step's communication) and resource records in
// rank-<r>.jsonl, and summary.json's all-reduce fields.
#include <algorithm>
#include <set>
#include <string>

#include <fmt/format.h>

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
  if (config.logical_shards > 0) rec.set("convert_s", t.convert);
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
  // Each step record reaches the file at once (one write per --log-every steps): a node
  // lost mid-run leaves the survivors' logs ending at their last step, which is how far an
  // elastic relaunch (scripts/mpirun/elastic.py) counts the steps it replays.
  log->flush();
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
  if (loader_row.size() != 3) loader_row.assign(3, 0.0);
  const std::vector<double> loaders = gather_rows(loader_row);
  // --bad-images skip: each rank skipped what it met; every name once, sorted.
  std::string mine;
  for (const std::string& b : data.train->bad_images()) mine += b + '\n';
  std::set<std::string> bad;
  for (const std::string& text : comm.allgather(mine)) {
    std::size_t start = 0;
    for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
      bad.insert(text.substr(start, end - start));
  }
  if (!root()) return;
  Json j = summary_head(images * world);
  j.set("global_batch_size", global_batch());
  j.set("allreduce", config.allreduce);
  j.set("tuning", config.tuning.empty() ? std::string("built-in") : config.tuning);
  j.set("allreduce_plan", plan_json());
  if (config.logical_shards > 0) j.set("logical_shards", config.logical_shards);
  // Every epoch uses the same count on every rank; the rest, fewer than one global batch, is
  // left out of each epoch (a different rest each epoch under a shuffle).
  if (config.shuffle != "exact") j.set("shuffle", config.shuffle);
  j.set("train_samples", static_cast<std::int64_t>(data.train->size()));
  j.set("train_samples_per_epoch", static_cast<std::int64_t>(samples_per_epoch));
  j.set("dropped_per_epoch", static_cast<std::int64_t>(data.train->size() - samples_per_epoch));
  j.set("resumed_from", resumed_from);
  if (snapshots) {
    Json s = snapshots->stats_json();
    s.set("every", config.snapshot_every);
    s.set("step_path_s", snapshot_seconds);
    s.set("step_path_cpu_s", snapshot_cpu_seconds);
    j.set("snapshots", std::move(s));
  }
  Json ranks = Json::array();
  for (int r = 0; r < world; ++r) {
    const double* row = all.data() + kCommonRowWidth * static_cast<std::size_t>(r);
    Json rj = common_rank_json(r, row, images);
    const double allreduce = row[4], exposed = row[5];
    rj.set("hidden_comm_share", allreduce > 0 ? 1.0 - exposed / allreduce : 0.0);
    // The loader threads' share of their capacity spent making samples: near 1, they are
    // what the step waits for (data_s); near 0, they idle.
    const double* l = loaders.data() + 3 * static_cast<std::size_t>(r);
    rj.set("loader_threads", static_cast<std::int64_t>(l[0]));
    rj.set("loader_busy_share", l[2] > 0 ? l[1] / l[2] : 0.0);
    ranks.push(std::move(rj));
  }
  j.set("ranks", std::move(ranks));
  if (config.data.skip_bad_images) {
    Json list = Json::array();
    for (const std::string& b : bad) list.push(b);
    j.set("bad_images_skipped", static_cast<std::int64_t>(bad.size()));
    j.set("bad_images", std::move(list));
  }
  log->write_json("summary.json", j);
}

std::vector<Trainer::State::BucketPlan> Trainer::State::bucket_plans() const {
  // Buckets come in at most a few sizes (all --bucket-mb but the last): one plan per size,
  // in the order the sizes first occur.
  std::vector<BucketPlan> plans;
  const Compression compression = parse_compression(config.compress);
  for (const auto& [offset, count] : sync->buckets()) {
    const std::size_t bytes = count * sizeof(float);
    auto same = std::find_if(plans.begin(), plans.end(), [&](const BucketPlan& p) { return p.bytes == bytes; });
    if (same != plans.end()) {
      ++same->buckets;
      continue;
    }
    plans.push_back(BucketPlan{bytes, 1, comm.plan_allreduce(algo, bytes, compression)});
  }
  return plans;
}

std::string Trainer::State::plan_text() const {
  if (world == 1) return "";
  std::string text;
  for (const BucketPlan& p : bucket_plans()) {
    std::string predicted;
    for (const auto& [a, seconds] : p.plan.predicted_s)
      predicted += fmt::format("{}{} {:.0f}", predicted.empty() ? "" : ", ", allreduce_algo_name(a), 1e6 * seconds);
    text += fmt::format("{}{} x {:.2f} MiB -> {} ({}{})", text.empty() ? "" : "; ", p.buckets,
                        static_cast<double>(p.bytes) / (1 << 20), allreduce_plan_label(p.plan), p.plan.basis,
                        predicted.empty() ? "" : "; predicted us: " + predicted);
  }
  return " [" + text + "]";
}

Json Trainer::State::plan_json() const {
  Json plans = Json::array();
  if (world == 1) return plans;
  for (const BucketPlan& p : bucket_plans()) {
    Json j = Json::object();
    j.set("bytes", p.bytes);
    j.set("buckets", p.buckets);
    j.set("algo", std::string(allreduce_algo_name(p.plan.algo)));
    // rab's lanes (RabenseifnerAllreduce.h); 1 for every other algorithm.
    j.set("lanes", p.plan.algo == AllreduceAlgo::kRabenseifner ? p.plan.rab_lanes : 1);
    j.set("basis", p.plan.basis);
    Json predicted = Json::object();
    for (const auto& [a, seconds] : p.plan.predicted_s) predicted.set(std::string(allreduce_algo_name(a)), 1e6 * seconds);
    j.set("predicted_us", std::move(predicted));
    plans.push(std::move(j));
  }
  return plans;
}

}  // namespace ringtrain
