// AsyncTrainer's checkpoints (the servers' shards and optimizer state, gathered into the
// same file layout a sync run writes, plus the async position), --resume, and its logs:
// worker step records with staleness, server records with updates/s and traffic, and
// summary.json with every rank's role and figures.
#include <algorithm>

#include <fmt/format.h>

#include "train/AsyncTrainerState.h"
#include "train/Checkpoint.h"
#include "train/CheckpointIo.h"

namespace ringtrain {
namespace {

constexpr int kBuckets = AsyncTrainer::kHistogramBuckets;

Json histogram_json(const double* counts) {
  // {"0": n0, "1": n1, ...}: only non-zero buckets; the last one collects the rest.
  Json j = Json::object();
  for (int i = 0; i < kBuckets; ++i) {
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
  if (config.resume.empty()) return;
  std::filesystem::path path = config.resume;
  if (config.resume == "auto") {
    path = Checkpoint::latest_in(checkpoint_dir);
    if (broadcast_string(comm, path.string(), 0).empty()) {
      if (root()) fmt::print("ringtrain: no checkpoint in {}; starting fresh\n", checkpoint_dir.string());
      return;
    }
  }
  CheckpointData ck = load_checkpoint_collective(comm, path);
  check_checkpoint_matches(ck, *model, path.string());
  if (ck.optimizer_state.size() != state_slots * model->num_params() ||
      ck.meta.at("optimizer").as_string() != optimizer_name) {
    throw CollectiveError(fmt::format(
        "{}: optimizer: the checkpoint holds {} state for '{}', this run uses '{}' with {} (pass the same --optimizer)",
        path.string(), ck.optimizer_state.size(), ck.meta.at("optimizer").as_string(), optimizer_name,
        state_slots * model->num_params()));
  }
  std::copy(ck.params.begin(), ck.params.end(), model->params().begin());
  std::copy(ck.buffers.begin(), ck.buffers.end(), model->buffers().begin());
  if (server) {
    const std::size_t b = layout->begin(rank);
    const std::size_t n = layout->size(rank);
    std::copy_n(ck.params.begin() + static_cast<std::ptrdiff_t>(b), n, server->params().begin());
    const auto state = server->optimizer_state();
    for (std::size_t slot = 0; slot < state_slots; ++slot) {
      std::copy_n(ck.optimizer_state.begin() + static_cast<std::ptrdiff_t>(slot * model->num_params() + b), n,
                  state.begin() + static_cast<std::ptrdiff_t>(slot * n));
    }
    server->set_optimizer_steps(static_cast<std::uint64_t>(ck.meta.at("optimizer_steps").as_int()));
  }
  global_step = ck.meta.at("global_step").as_int();
  if (server) server->set_updates(global_step);
  epoch = static_cast<int>(ck.meta.at("epoch").as_int());
  prior_elapsed = ck.meta.at("elapsed_s").as_double();
  const Json* saved_mode = ck.meta.find("mode");
  const Json* saved_workers = ck.meta.find("workers");
  const bool same_split = saved_mode != nullptr && saved_mode->as_string() == "async" && saved_workers != nullptr &&
                          saved_workers->as_int() == workers &&
                          ck.meta.at("batch_size").as_int() == config.batch_size;
  if (same_split) {
    tickets_done = ck.meta.at("tickets_done").as_int();
    epoch_loss_sum = ck.meta.at("epoch_loss_sum").as_double();
    epoch_correct = ck.meta.at("epoch_correct").as_double();
    epoch_count = ck.meta.at("epoch_count").as_double();
    epoch_seconds = ck.meta.at("epoch_seconds").as_double();
    // K = 0 works in whole rounds; another K may have stopped mid-round.
    if (config.max_staleness == 0) tickets_done -= tickets_done % workers;
    if (root()) {
      fmt::print("ringtrain: resumed from {} at epoch {}, batch {} of {} (step {})\n", path.string(), epoch + 1,
                 tickets_done, tickets_per_epoch, global_step);
    }
  } else if (root()) {
    fmt::print("ringtrain: note: checkpoint {} was not written by an async run of {} worker(s) with batch {}: "
               "continuing from the start of epoch {} (step {})\n",
               path.string(), workers, config.batch_size, epoch + 1, global_step);
  }
}

double AsyncTrainer::State::save_checkpoint() {
  const auto t0 = Clock::now();
  gather_model();
  // The optimizer state in the sync layout: slot k of the whole vector is the servers'
  // slot-k shards side by side.
  std::vector<float> state(root() ? state_slots * model->num_params() : 0);
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
                    state.begin() + static_cast<std::ptrdiff_t>(slot * model->num_params() + layout->begin(s)));
      }
    }
  }
  if (root()) {
    CheckpointData ck;
    Json meta = Json::object();
    meta.set("format_version", Checkpoint::kFormatVersion);
    meta.set("model", config.model);
    meta.set("signature", model->signature());
    meta.set("input_shape", model->input_shape().str());
    meta.set("classes", model->classes());
    meta.set("num_params", model->num_params());
    meta.set("world_size", world);
    meta.set("mode", "async");
    meta.set("servers", servers);
    meta.set("workers", workers);
    meta.set("max_staleness", config.max_staleness);
    meta.set("batch_size", config.batch_size);
    meta.set("global_step", global_step);
    meta.set("server_updates", global_step);
    meta.set("epoch", epoch);
    meta.set("tickets_done", tickets_done);
    meta.set("step_in_epoch", tickets_done / tickets_per_update());
    meta.set("elapsed_s", elapsed());
    meta.set("epoch_loss_sum", epoch_loss_sum);
    meta.set("epoch_correct", epoch_correct);
    meta.set("epoch_count", epoch_count);
    meta.set("epoch_seconds", epoch_seconds);
    meta.set("seed", config.seed);
    meta.set("rng", "counter-based: every stream is derived from (seed, purpose, epoch, step)");
    meta.set("optimizer", optimizer_name);
    meta.set("optimizer_steps", server->optimizer_steps());
    meta.set("lr", schedule->lr(static_cast<double>(epoch)));
    meta.set("test_accuracy", last_test_accuracy);
    meta.set("config", config.to_json());
    ck.meta = std::move(meta);
    const auto p = model->params();
    ck.params.assign(p.begin(), p.end());
    const auto b = model->buffers();
    ck.buffers.assign(b.begin(), b.end());
    ck.optimizer_state = std::move(state);
    const auto bytes = Checkpoint::serialize(ck);
    last_checkpoint = checkpoint_dir / Checkpoint::file_name(global_step);
    Checkpoint::write(last_checkpoint, bytes);
    Checkpoint::prune(checkpoint_dir, config.keep_checkpoints);
    Json rec = Json::object();
    rec.set("type", "checkpoint");
    rec.set("t", elapsed());
    rec.set("epoch", epoch);
    rec.set("step", global_step);
    rec.set("seconds", std::chrono::duration<double>(Clock::now() - t0).count());
    rec.set("bytes", bytes.size());
    rec.set("path", last_checkpoint.string());
    log->record(rec);
  }
  last_checkpoint = broadcast_string(comm, last_checkpoint.string(), 0);
  return std::chrono::duration<double>(Clock::now() - t0).count();
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
  Json rec = Json::object();
  rec.set("type", "resource");
  rec.set("t", elapsed());
  rec.set("cpu_percent", rs.cpu_percent);
  rec.set("rss_mb", rs.rss_mb);
  rec.set("peak_rss_mb", rs.peak_rss_mb);
  rec.set("net_send_mbps", static_cast<double>(mark.sent - last_tick.sent) / 1e6 / dt);
  rec.set("net_recv_mbps", static_cast<double>(mark.received - last_tick.received) / 1e6 / dt);
  log->record(rec);
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

void AsyncTrainer::State::write_summary(const TrainResult& result) {
  const ResourceSample rs = monitor.sample();
  std::vector<double> mine = {result.wall_s,
                              worker_totals.data,
                              worker_totals.forward,
                              worker_totals.backward,
                              worker_totals.exchange,
                              worker_totals.wait,
                              checkpoint_seconds,
                              eval_seconds,
                              std::max(monitor.peak_rss_mb(), rs.peak_rss_mb),
                              monitor.mean_cpu_percent(),
                              static_cast<double>(bytes_sent()) / 1e6,
                              static_cast<double>(bytes_received()) / 1e6,
                              static_cast<double>(worker_steps),
                              server ? static_cast<double>(server->updates()) : 0.0,
                              segment_seconds};
  const std::size_t fixed = mine.size();
  mine.resize(fixed + 2 * kBuckets, 0.0);
  if (worker) {
    fold(worker->staleness_histogram(), mine.data() + fixed);
    fold(worker->delay_histogram(), mine.data() + fixed + kBuckets);
  }
  const std::size_t width = mine.size();
  std::vector<double> all(width * static_cast<std::size_t>(world), 0.0);
  std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(width * static_cast<std::size_t>(rank)));
  comm.allreduce_sum(all);

  std::vector<double> total_staleness(kBuckets, 0.0), total_delay(kBuckets, 0.0);
  for (int r = servers; r < world; ++r) {
    const double* row = all.data() + width * static_cast<std::size_t>(r);
    for (int i = 0; i < kBuckets; ++i) {
      total_staleness[static_cast<std::size_t>(i)] += row[fixed + static_cast<std::size_t>(i)];
      total_delay[static_cast<std::size_t>(i)] += row[fixed + kBuckets + static_cast<std::size_t>(i)];
    }
  }
  staleness_all.assign(kBuckets, 0);
  for (int i = 0; i < kBuckets; ++i) staleness_all[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(total_staleness[static_cast<std::size_t>(i)]);
  if (!root()) return;

  Json j = Json::object();
  j.set("model", config.model);
  j.set("dataset", config.data.name);
  j.set("mode", "async");
  j.set("world_size", world);
  j.set("servers", servers);
  j.set("workers", workers);
  j.set("max_staleness", config.max_staleness);
  j.set("batch_size", config.batch_size);
  j.set("global_batch_size", config.max_staleness == 0 ? config.batch_size * workers : config.batch_size);
  j.set("allreduce", "none");
  j.set("wall_s", result.wall_s);
  double images = 0.0;
  for (int r = servers; r < world; ++r) images += all[width * static_cast<std::size_t>(r) + 12] * config.batch_size;
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
  j.set("staleness_histogram", histogram_json(total_staleness.data()));
  j.set("delay_histogram", histogram_json(total_delay.data()));
  Json ranks = Json::array();
  for (int r = 0; r < world; ++r) {
    const double* row = all.data() + width * static_cast<std::size_t>(r);
    const bool srv = r < servers;
    Json rj = Json::object();
    rj.set("rank", r);
    rj.set("role", srv ? "server" : "worker");
    rj.set("host", hosts[static_cast<std::size_t>(r)]);
    rj.set("wall_s", row[0]);
    rj.set("images_per_s", row[0] > 0 ? row[12] * config.batch_size / row[0] : 0.0);
    Json p = Json::object();
    p.set("data", row[1]);
    p.set("forward", row[2]);
    p.set("backward", row[3]);
    p.set("allreduce", row[4]);
    p.set("wait", row[5]);
    p.set("optimizer", 0.0);
    p.set("checkpoint", row[6]);
    p.set("eval", row[7]);
    rj.set("phases_s", std::move(p));
    rj.set("peak_rss_mb", row[8]);
    rj.set("mean_cpu_percent", row[9]);
    rj.set("mb_sent", row[10]);
    rj.set("mb_received", row[11]);
    rj.set("busy_s", row[14]);
    if (srv) {
      rj.set("updates", static_cast<std::int64_t>(row[13]));
      rj.set("updates_per_s", row[14] > 0 ? row[13] / row[14] : 0.0);
    } else {
      rj.set("steps", static_cast<std::int64_t>(row[12]));
      rj.set("steps_per_s", row[14] > 0 ? row[12] / row[14] : 0.0);
      rj.set("staleness_histogram", histogram_json(row + fixed));
      rj.set("delay_histogram", histogram_json(row + fixed + kBuckets));
    }
    ranks.push(std::move(rj));
  }
  j.set("ranks", std::move(ranks));
  log->write_json("summary.json", j);
}

}  // namespace ringtrain
