// AsyncTrainer's checkpoints (the servers' shards and optimizer state, gathered into the
// same file layout a sync run writes, plus the async position), --resume, and its logs:
// worker step records with staleness, server records with updates/s and traffic, and
// summary.json with every rank's role and figures.
#include <algorithm>

#include <fmt/format.h>

#include "async/AsyncTrainerState.h"
#include "checkpoint/CheckpointIo.h"
#include "checkpoint/RunCheckpoint.h"

namespace ringtrain {
namespace {

constexpr std::size_t kBuckets = AsyncTrainer::kHistogramBuckets;

Json histogram_json(const double* counts) {
  // {"0": n0, "1": n1, ...}: only non-zero buckets; the last one collects the rest.
  Json j = Json::object();
  for (std::size_t i = 0; i < kBuckets; ++i) {
    if (counts[i] == 0.0) continue;
    j.set(i + 1 == kBuckets ? fmt::format("{}+", i) : std::to_string(i), static_cast<std::int64_t>(counts[i]));
  }
  return j;
}

void fold(const std::vector<std::int64_t>& hist, double* out) {
  for (std::size_t i = 0; i < hist.size(); ++i) out[std::min<std::size_t>(i, kBuckets - 1)] += static_cast<double>(hist[i]);
}

}  // namespace

void AsyncTrainer::State::maybe_resume() {
  std::optional<ResumeCheckpoint> resume = load_resume_checkpoint(comm, config.resume, checkpoint_dir, *model_);
  if (!resume) return;
  const CheckpointData& ck = resume->data;
  const std::string path = resume->path.string();
  check_checkpoint_optimizer(ck, optimizer_name, state_slots * model_->num_params(), path);
  restore_model(ck, *model_);
  const CheckpointPoint saved = checkpoint_point(ck.meta);
  if (server) {
    const std::size_t b = layout->begin(rank);
    const std::size_t n = layout->size(rank);
    std::copy_n(ck.params.begin() + static_cast<std::ptrdiff_t>(b), n, server->params().begin());
    const auto state = server->optimizer_state();
    for (std::size_t slot = 0; slot < state_slots; ++slot) {
      std::copy_n(ck.optimizer_state.begin() + static_cast<std::ptrdiff_t>(slot * model_->num_params() + b), n,
                  state.begin() + static_cast<std::ptrdiff_t>(slot * n));
    }
    server->set_optimizer_steps(saved.optimizer_steps);
    server->set_updates(saved.at.global_step);
  }
  global_step = saved.at.global_step;
  epoch = saved.at.epoch;
  prior_elapsed = saved.elapsed_s;
  const Json* saved_mode = ck.meta.find("mode");
  const Json* saved_workers = ck.meta.find("workers");
  const bool same_split = saved_mode != nullptr && saved_mode->as_string() == "async" && saved_workers != nullptr &&
                          saved_workers->as_int() == workers && saved.batch_size == config.batch_size;
  if (same_split) {
    tickets_done = ck.meta.at("tickets_done").as_int();
    epoch_totals = saved.totals;
    // K = 0 works in whole rounds; another K may have stopped mid-round.
    if (config.max_staleness == 0) tickets_done -= tickets_done % workers;
    if (root()) {
      fmt::print("ringtrain: resumed from {} at epoch {}, batch {} of {} (step {})\n", path, epoch + 1,
                 tickets_done, tickets_per_epoch, global_step);
    }
  } else if (root()) {
    fmt::print("ringtrain: note: checkpoint {} was not written by an async run of {} worker(s) with batch {}: "
               "continuing from the start of epoch {} (step {})\n",
               path, workers, config.batch_size, epoch + 1, global_step);
  }
}

TrainingRun::LoopCheckpoint AsyncTrainer::State::checkpoint_data() {
  // The optimizer state in the sync layout: slot k of the whole vector is the servers'
  // slot-k shards side by side.
  std::vector<float> state(root() ? state_slots * model_->num_params() : 0);
  std::vector<float> piece;
  for (int s = 0; s < servers; ++s) {
    const std::size_t n = layout->size(s);
    if (n == 0 || state_slots == 0) continue;
    if (rank == s) {
      const auto st = server->optimizer_state();
      piece.assign(st.begin(), st.end());
    } else {
      piece.assign(state_slots * n, 0.0f);
    }
    comm.broadcast(std::span<float>(piece), s);
    if (root()) {
      for (std::size_t slot = 0; slot < state_slots; ++slot) {
        std::copy_n(piece.begin() + static_cast<std::ptrdiff_t>(slot * n), n,
                    state.begin() + static_cast<std::ptrdiff_t>(slot * model_->num_params() + layout->begin(s)));
      }
    }
  }
  LoopCheckpoint ck{{epoch, tickets_done / tickets_per_update(), global_step}, {}, {}, {}};
  if (root()) {
    const LoopPosition& at = ck.at;
    Json meta = checkpoint_meta(config, *model_, world,
                                {at, epoch_totals, elapsed(), optimizer_name, server->optimizer_steps(),
                                 schedule->lr(static_cast<double>(epoch)), last_test_accuracy});
    meta.set("mode", "async");
    meta.set("servers", servers);
    meta.set("workers", workers);
    meta.set("max_staleness", config.max_staleness);
    meta.set("server_updates", global_step);
    meta.set("tickets_done", tickets_done);
    ck.meta = std::move(meta);
    ck.gathered = std::make_unique<const std::vector<float>>(std::move(state));
    ck.optimizer_state = *ck.gathered;
  }
  return ck;
}

void AsyncTrainer::State::record_worker(const WorkerRecord& r) {
  Json rec = Json::object();
  rec.set("type", "step");
  rec.set("role", "worker");
  rec.set("t", elapsed());
  rec.set("epoch", epoch + 1);
  logged_steps += r.steps;
  rec.set("step", logged_steps);  // this worker's own steps so far
  rec.set("steps", r.steps);
  rec.set("data_s", r.times.data);
  rec.set("forward_s", r.times.forward);
  rec.set("backward_s", r.times.backward);
  // The push/pull exchange takes the all-reduce's place in the step.
  rec.set("allreduce_s", r.times.exchange);
  rec.set("wait_s", r.times.wait);
  rec.set("optimizer_s", 0.0);
  rec.set("checkpoint_s", 0.0);
  rec.set("bytes_sent", bytes_sent());
  rec.set("bytes_received", bytes_received());
  rec.set("loss", r.count > 0 ? r.loss_sum / r.count : std::nan(""));
  rec.set("images", static_cast<std::int64_t>(r.count));
  Json st = Json::array();
  for (auto v : r.staleness) st.push(v);
  rec.set("staleness", std::move(st));
  Json dl = Json::array();
  for (auto v : r.delay) dl.push(v);
  rec.set("delay", std::move(dl));
  log->record(rec);
  worker_totals.data += r.times.data;
  worker_totals.forward += r.times.forward;
  worker_totals.backward += r.times.backward;
  worker_totals.exchange += r.times.exchange;
  worker_totals.wait += r.times.wait;
  if (std::chrono::duration<double>(Clock::now() - last_tick.time).count() >= 1.0) record_resources();
}

void AsyncTrainer::State::record_resources() {
  const auto now = Clock::now();
  const double dt = std::chrono::duration<double>(now - last_tick.time).count();
  if (dt <= 0.0) return;
  const ResourceSample rs = monitor.sample();
  const Mark mark{now, bytes_sent(), bytes_received(), server ? server->updates() : 0};
  log->record(resource_record(rs, mark.sent - last_tick.sent, mark.received - last_tick.received, dt));
  if (server) {
    Json srec = Json::object();
    srec.set("type", "server");
    srec.set("t", elapsed());
    srec.set("epoch", epoch + 1);
    srec.set("updates", mark.updates);
    srec.set("updates_per_s", static_cast<double>(mark.updates - last_tick.updates) / dt);
    srec.set("mb_in_per_s", static_cast<double>(mark.received - last_tick.received) / 1e6 / dt);
    srec.set("mb_out_per_s", static_cast<double>(mark.sent - last_tick.sent) / 1e6 / dt);
    srec.set("bytes_received", mark.received);
    srec.set("bytes_sent", mark.sent);
    log->record(srec);
  }
  log->flush();
  last_tick = mark;
}

void AsyncTrainer::State::on_tick() {
  record_resources();
  if (root()) {
    // Mid-segment, global_step still counts the updates before the segment.
    const double n = server->epoch_count();
    const double seconds = std::chrono::duration<double>(Clock::now() - epoch_started).count();
    progress->step(tickets_done / tickets_per_update() + server->updates() - global_step,
                   n > 0 ? server->epoch_loss_sum() / n : 0.0, n / std::max(seconds, 1e-9));
  }
}

void AsyncTrainer::State::write_summary() {
  // Each rank's common figures (the push/pull exchange in the all-reduce's place, all of it
  // exposed), then its steps, updates, busy seconds and staleness and delay histograms.
  const WorkerTimes& w = worker_totals;
  std::vector<double> mine = common_row(
      {.data = w.data, .forward = w.forward, .backward = w.backward, .allreduce = w.exchange, .exposed = w.exchange,
       .wait = w.wait},
      bytes_sent(), bytes_received());
  mine.push_back(static_cast<double>(worker_steps));
  mine.push_back(server ? static_cast<double>(server->updates()) : 0.0);
  mine.push_back(segment_seconds);
  const std::size_t hist = mine.size();
  mine.resize(hist + 2 * kBuckets, 0.0);
  if (worker) {
    fold(worker->staleness_histogram(), mine.data() + hist);
    fold(worker->delay_histogram(), mine.data() + hist + kBuckets);
  }
  const std::size_t width = mine.size();
  const std::vector<double> all = gather_rows(mine);
  std::vector<double> staleness(kBuckets, 0.0), delay(kBuckets, 0.0);
  double images = 0.0;
  for (int r = servers; r < world; ++r) {
    const double* row = all.data() + width * static_cast<std::size_t>(r);
    images += row[kCommonRowWidth] * config.batch_size;
    for (std::size_t i = 0; i < kBuckets; ++i) {
      staleness[i] += row[hist + i];
      delay[i] += row[hist + kBuckets + i];
    }
  }
  staleness_all.assign(staleness.begin(), staleness.end());
  if (!root()) return;

  Json j = summary_head(images);
  j.set("servers", servers);
  j.set("workers", workers);
  j.set("max_staleness", config.max_staleness);
  j.set("global_batch_size", config.max_staleness == 0 ? config.batch_size * workers : config.batch_size);
  j.set("allreduce", "none");
  j.set("staleness_histogram", histogram_json(staleness.data()));
  j.set("delay_histogram", histogram_json(delay.data()));
  Json ranks = Json::array();
  for (int r = 0; r < world; ++r) ranks.push(rank_json(r, all.data() + width * static_cast<std::size_t>(r), hist));
  j.set("ranks", std::move(ranks));
  log->write_json("summary.json", j);
}

Json AsyncTrainer::State::rank_json(int r, const double* row, std::size_t hist) const {
  const double steps = row[kCommonRowWidth], updates = row[kCommonRowWidth + 1], busy = row[kCommonRowWidth + 2];
  Json rj = common_rank_json(r, row, steps * config.batch_size);
  rj.set("role", r < servers ? "server" : "worker");
  rj.set("busy_s", busy);
  if (r < servers) {
    rj.set("updates", static_cast<std::int64_t>(updates));
    rj.set("updates_per_s", busy > 0 ? updates / busy : 0.0);
  } else {
    rj.set("steps", static_cast<std::int64_t>(steps));
    rj.set("steps_per_s", busy > 0 ? steps / busy : 0.0);
    rj.set("staleness_histogram", histogram_json(row + hist));
    rj.set("delay_histogram", histogram_json(row + hist + kBuckets));
  }
  return rj;
}

}  // namespace ringtrain
