// AsyncTrainer: set-up (roles, shards, resume) and the epoch loop of asynchronous training.
// An epoch runs as one or more segments: every server serves and every worker works until
// server 0 has handed out the segment's batches (or a stop), then all ranks meet to agree
// on the position, and to evaluate, checkpoint or stop.
#include "async/AsyncTrainer.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/CollectiveError.h"
#include "run/Agreement.h"
#include "async/AsyncTrainerState.h"
#include "checkpoint/CheckpointIo.h"
#include "run/Evaluate.h"
#include "run/StopSignals.h"
#include "run/TrainerShared.h"
#include "run/Versions.h"

namespace ringtrain {
AsyncTrainer::AsyncTrainer(TrainConfig config, Communicator& comm)
    : s_(std::make_unique<State>(std::move(config), comm)) {}
AsyncTrainer::~AsyncTrainer() = default;

const Model& AsyncTrainer::model() const {
  if (!s_->model) throw std::logic_error("AsyncTrainer::model() before run()");
  return *s_->model;
}

const std::vector<std::int64_t>& AsyncTrainer::staleness_histogram() const { return s_->staleness_all; }

TrainResult AsyncTrainer::run() {
  s_->setup();
  return s_->train();
}

void AsyncTrainer::State::setup_local() {
  config.validate();
  if (config.mode != "async") throw std::invalid_argument("AsyncTrainer needs --mode async");
  if (world < 2 || config.servers >= world) {
    throw std::invalid_argument(fmt::format(
        "--servers {} needs at least {} ranks (servers plus one worker or more); this run has {}: raise mpirun -np "
        "or lower --servers",
        config.servers, config.servers + 1, world));
  }
  servers = config.servers;
  workers = world - servers;
  if (config.eval_batch_size == 0) config.eval_batch_size = std::max(config.batch_size, 256);
  // The cosine schedule anneals over the whole run, as in sync mode.
  config.schedule.total_epochs = config.epochs;

  data = load_dataset(config.data);
  model = std::make_unique<Model>(config.model, data.train->shape(), data.train->classes());
  model->init(config.seed);
  schedule = std::make_unique<LrSchedule>(config.schedule);
  layout = std::make_unique<ShardLayout>(model->num_params(), servers);
  if (config.optimizer.name == "lars" && layout->splits_a_tensor(model->param_infos())) {
    throw std::invalid_argument("--optimizer lars needs whole tensors on each server: use --servers 1");
  }
  {
    // The full-size optimizer is built once to learn its state layout (and to validate the
    // hyper-parameters on every rank); the servers then build theirs over their shards.
    const auto full = Optimizer::create(config.optimizer, model->param_infos(), model->num_params());
    state_slots = model->num_params() > 0 ? full->state().size() / model->num_params() : 0;
    optimizer_name = full->name();
  }
  const std::size_t per_worker = data.train->size() / static_cast<std::size_t>(workers);
  const std::size_t batches = per_worker / static_cast<std::size_t>(config.batch_size);
  if (batches == 0) {
    throw std::invalid_argument(fmt::format(
        "--batch-size {} is larger than each worker's share of the training set ({} of {} samples over {} workers): "
        "no step would run",
        config.batch_size, per_worker, data.train->size(), workers));
  }
  tickets_per_epoch = static_cast<std::int64_t>(batches) * workers;
}

void AsyncTrainer::State::setup() {
  rank = comm.rank();
  world = comm.size();
  run_agreed(comm, [&] { setup_local(); });
  check_configuration_agrees(comm, config, *model);
  comm.broadcast(model->params(), 0);
  if (!model->buffers().empty()) comm.broadcast(model->buffers(), 0);

  std::string dir = config.run_dir.empty() ? default_run_dir(config.model, world, "-async") : config.run_dir;
  run_dir = broadcast_string(comm, dir, 0);
  checkpoint_dir = config.checkpoint_dir.empty() ? run_dir / "checkpoints" : std::filesystem::path(config.checkpoint_dir);
  hosts = comm.allgather(comm.host_name());

  channel = std::make_unique<PeerChannel>(comm);
  run_agreed(comm, [&] {
    if (is_server()) {
      server = std::make_unique<ParameterServer>(*channel, *layout, config.max_staleness, config.optimizer,
                                                 model->param_infos(), *schedule, tickets_per_epoch);
      const auto p = model->params();
      std::copy_n(p.begin() + static_cast<std::ptrdiff_t>(layout->begin(rank)), layout->size(rank),
                  server->params().begin());
    } else {
      worker = std::make_unique<AsyncWorker>(*channel, *layout, config.max_staleness, *model, *data.train,
                                             config.batch_size, config.seed, config.data.augment, config.straggler_ms);
    }
  });

  maybe_resume();

  const std::string versions = root() ? versions_json(comm).dump() : std::string();
  run_agreed(comm, [&] {
    log = std::make_unique<RunLog>(run_dir, rank, root(), /*append=*/global_step > 0 || tickets_done > 0);
    progress = std::make_unique<Progress>(root() && !config.quiet, config.epochs, Progress::parse_style(config.progress));
    if (root()) {
      Json j = base_config_json(config, world, hosts, data, *model, checkpoint_dir, versions);
      j.set("global_batch_size", config.max_staleness == 0 ? config.batch_size * workers : config.batch_size);
      j.set("workers", workers);
      Json shards = Json::array();
      for (int s = 0; s < servers; ++s) {
        Json sj = Json::object();
        sj.set("rank", s);
        sj.set("begin", layout->begin(s));
        sj.set("size", layout->size(s));
        shards.push(std::move(sj));
      }
      j.set("shards", std::move(shards));
      log->write_json("config.json", j);
    }
  });
}

void AsyncTrainer::State::gather_model() {
  if (is_server()) {
    const auto p = model->params();
    std::copy(server->params().begin(), server->params().end(),
              p.begin() + static_cast<std::ptrdiff_t>(layout->begin(rank)));
  }
  for (int s = 0; s < servers; ++s) {
    if (layout->size(s) > 0) comm.broadcast(model->params().subspan(layout->begin(s), layout->size(s)), s);
  }
  // Non-trained buffers (BatchNorm statistics) live on the workers: their mean.
  const auto b = model->buffers();
  if (!b.empty()) {
    if (is_server()) std::fill(b.begin(), b.end(), 0.0f);
    comm.allreduce(b, AllreduceAlgo::kMpi, /*mean=*/false);
    const float inv = 1.0f / static_cast<float>(workers);
    for (float& x : b) x *= inv;
  }
}

std::pair<double, double> AsyncTrainer::State::evaluate() {
  gather_model();
  const EvalResult r = evaluate_model(comm, *model, *data.test, config.eval_batch_size);
  return {r.loss, r.accuracy};
}

TrainResult AsyncTrainer::State::train() {
  TrainResult result;
  result.run_dir = run_dir;
  result.stopped_by = "epochs";
  // From here a stop signal is a request the segments answer (StopSignals.h).
  set_stop_signals_polled(true);
  train_start = Clock::now();
  last_tick = {Clock::now(), bytes_sent(), bytes_received(), server ? server->updates() : 0};
  const std::int64_t per_update = tickets_per_update();
  if (root() && global_step == 0 && tickets_done == 0) {
    progress->note(fmt::format(
        "ringtrain: {} on {} ({} train / {} test, {}), async: {} server(s) + {} worker(s) x batch {}, max staleness "
        "{}, {} params, run dir {}",
        config.model, config.data.name, data.train->size(), data.test->size(), data.train->shape().str(), servers,
        workers, config.batch_size, config.max_staleness < 0 ? std::string("unbounded") : std::to_string(config.max_staleness),
        model->num_params(), run_dir.string()));
  }

  bool stop = false;
  for (; epoch < config.epochs && !stop; ++epoch) {
    progress->begin_epoch(epoch + 1, tickets_per_epoch / per_update);
    const auto epoch_start = Clock::now();
    epoch_started = epoch_start;
    const double epoch_seconds_before = epoch_totals.seconds;
    if (server) server->reset_epoch_sums();

    while (tickets_done < tickets_per_epoch) {
      std::int64_t limit = tickets_per_epoch;
      if (config.max_steps > 0) limit = std::min(limit, tickets_done + (config.max_steps - global_step) * per_update);
      bool at_checkpoint = false;
      if (config.checkpoint_every_steps > 0) {
        const std::int64_t next = (global_step / config.checkpoint_every_steps + 1) * config.checkpoint_every_steps;
        const std::int64_t at = tickets_done + (next - global_step) * per_update;
        if (at < limit) {
          limit = at;
          at_checkpoint = true;
        } else if (at == limit) {
          at_checkpoint = true;
        }
      }

      const auto t0 = Clock::now();
      double mine[6] = {0, 0, 0, 0, 0, 0};  // stop, tickets_done, updates, loss, correct, count
      if (server) {
        const ServerSegmentResult r = server->serve({epoch, tickets_done, limit}, [this] { on_tick(); });
        mine[0] = r.stop_seen ? 1.0 : 0.0;
        if (root()) {
          mine[1] = static_cast<double>(r.tickets_done);
          mine[2] = static_cast<double>(r.updates);
        }
      } else {
        const WorkerSegmentResult r =
            worker->run(epoch, tickets_done, config.log_every, [this](const WorkerRecord& rec) { record_worker(rec); });
        mine[3] = r.loss_sum;
        mine[4] = r.correct;
        mine[5] = r.count;
        worker_steps += r.steps;
      }
      segment_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
      if (stop_requested()) mine[0] = 1.0;
      comm.allreduce_sum(mine);
      tickets_done = static_cast<std::int64_t>(mine[1]);
      global_step += static_cast<std::int64_t>(mine[2]);
      epoch_totals.loss_sum += mine[3];
      epoch_totals.correct += mine[4];
      epoch_totals.count += mine[5];
      if (!std::isfinite(mine[3])) {
        throw CollectiveError(fmt::format("loss became {} by step {} (epoch {}); lower --lr",
                                          std::isnan(mine[3]) ? "NaN" : "Inf", global_step, epoch + 1));
      }
      stop = mine[0] > 0.0;
      epoch_totals.seconds = epoch_seconds_before + std::chrono::duration<double>(Clock::now() - epoch_start).count();
      if (stop) {
        result.stopped_by = "signal";
      } else if (config.max_steps > 0 && global_step >= config.max_steps) {
        result.stopped_by = "max_steps";
        stop = true;
      }
      if (result.stopped_by == "signal" || (at_checkpoint && tickets_done == limit)) {
        checkpoint_seconds += save_checkpoint();
      }
      if (stop) break;
    }
    if (stop && tickets_done < tickets_per_epoch) {
      if (result.stopped_by == "signal") {
        progress->note(fmt::format("ringtrain: stopped by signal at step {} (epoch {}); checkpoint {}", global_step,
                                   epoch + 1, last_checkpoint.string()));
      }
      break;
    }

    const double train_loss = epoch_totals.loss_sum / std::max(epoch_totals.count, 1.0);
    const double train_acc = epoch_totals.correct / std::max(epoch_totals.count, 1.0);
    last_train_loss = train_loss;
    EpochMetrics m;
    m.epoch = epoch + 1;
    m.step = global_step;
    m.lr = schedule->lr(static_cast<double>(epoch) + 1.0 - 1.0 / static_cast<double>(tickets_per_epoch / per_update));
    m.train_loss = train_loss;
    m.train_accuracy = train_acc;
    m.test_loss = std::nan("");
    m.test_accuracy = std::nan("");
    const bool last_epoch = epoch + 1 == config.epochs || stop;
    if ((config.eval_every > 0 && (epoch + 1) % config.eval_every == 0) || last_epoch || config.target_accuracy > 0.0) {
      const auto te = Clock::now();
      std::tie(last_test_loss, last_test_accuracy) = evaluate();
      last_eval_step = global_step;
      const double secs = std::chrono::duration<double>(Clock::now() - te).count();
      eval_seconds += secs;
      log->record(eval_record(elapsed(), epoch + 1, global_step, last_test_loss, last_test_accuracy, secs));
      m.test_loss = last_test_loss;
      m.test_accuracy = last_test_accuracy;
    }
    m.elapsed_s = elapsed();
    m.images_per_s = epoch_totals.count / std::max(epoch_totals.seconds, 1e-9);
    if (root()) log->metrics(m);
    progress->end_epoch(epoch_line(m, config.epochs, epoch_totals.seconds));

    epoch_totals = {};
    tickets_done = 0;
    result.epochs_completed = epoch + 1;
    if (config.target_accuracy > 0.0 && last_test_accuracy >= config.target_accuracy) {
      result.time_to_target_s = elapsed();
      result.stopped_by = "target_accuracy";
      progress->note(fmt::format("ringtrain: reached test accuracy {:.4f} >= {} after {:.1f}s (epoch {}, step {})",
                                 last_test_accuracy, config.target_accuracy, *result.time_to_target_s, epoch + 1,
                                 global_step));
      stop = true;
    }
    if (config.checkpoint_every > 0 && (epoch + 1) % config.checkpoint_every == 0 && result.stopped_by != "signal" &&
        !(config.checkpoint_every_steps > 0 && global_step % config.checkpoint_every_steps == 0)) {
      ++epoch;  // the checkpoint's position is the start of the next epoch
      checkpoint_seconds += save_checkpoint();
      --epoch;
    }
    log->flush();
  }
  if (result.epochs_completed == 0 && epoch > 0) result.epochs_completed = epoch;

  // Every rank ends with the servers' final parameters (Trainer::model(), tests).
  if (last_eval_step != global_step && result.stopped_by != "signal") {
    const auto te = Clock::now();
    std::tie(last_test_loss, last_test_accuracy) = evaluate();
    eval_seconds += std::chrono::duration<double>(Clock::now() - te).count();
    if (root()) {
      EpochMetrics m;
      m.epoch = epoch + 1;
      m.step = global_step;
      m.lr = schedule->lr(static_cast<double>(epoch));
      m.train_loss = epoch_totals.count > 0 ? epoch_totals.loss_sum / epoch_totals.count : std::nan("");
      m.train_accuracy = epoch_totals.count > 0 ? epoch_totals.correct / epoch_totals.count : std::nan("");
      m.test_loss = last_test_loss;
      m.test_accuracy = last_test_accuracy;
      m.elapsed_s = elapsed();
      m.images_per_s = epoch_totals.count / std::max(epoch_totals.seconds, 1e-9);
      log->metrics(m);
    }
    if (std::isnan(last_train_loss) && epoch_totals.count > 0) last_train_loss = epoch_totals.loss_sum / epoch_totals.count;
    progress->note(fmt::format("ringtrain: stopped at step {} (--max-steps): test loss {:.4f} acc {:.4f}", global_step,
                               last_test_loss, last_test_accuracy));
  } else if (result.stopped_by == "signal") {
    gather_model();
  }
  result.steps = global_step;
  result.final_train_loss = last_train_loss;
  result.final_test_loss = last_test_loss;
  result.final_test_accuracy = last_test_accuracy;
  result.wall_s = elapsed();
  result.last_checkpoint = last_checkpoint;
  write_summary(result);
  log->flush();
  return result;
}

}  // namespace ringtrain
