// AsyncTrainer: set-up (roles, shards, resume) and the epoch loop of asynchronous training.
// An epoch runs as one or more segments: every server serves and every worker works until
// server 0 has handed out the segment's batches (or a stop), then all ranks meet to agree
// on the position, and to evaluate, checkpoint or stop (TrainingRun).
#include "async/AsyncTrainer.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "async/AsyncTrainerState.h"
#include "common/CollectiveError.h"
#include "run/Agreement.h"
#include "run/StopSignals.h"

namespace ringtrain {
AsyncTrainer::AsyncTrainer(TrainConfig config, Communicator& comm)
    : s_(std::make_unique<State>(std::move(config), comm)) {}
AsyncTrainer::~AsyncTrainer() = default;

const Model& AsyncTrainer::model() const { return s_->model(); }

const std::vector<std::int64_t>& AsyncTrainer::staleness_histogram() const { return s_->staleness_all; }

TrainResult AsyncTrainer::run() {
  s_->setup();
  return s_->train();
}

TrainResult AsyncTrainer::State::train() {
  begin_training();
  last_tick = {Clock::now(), bytes_sent(), bytes_received(), server ? server->updates() : 0};
  announce();

  bool stop = false;
  while (!stop && epoch < config.epochs) {
    begin_epoch(epoch, updates_per_epoch());
    epoch_started = Clock::now();
    if (server) server->reset_epoch_sums();
    while (!stop && tickets_done < tickets_per_epoch) stop = run_segment();
    if (tickets_done < tickets_per_epoch) {  // stopped mid-epoch: no epoch summary
      note_stopped_mid_epoch(epoch, global_step);
      break;
    }
    stop = end_epoch(epoch, global_step, updates_per_epoch(), stop) || stop;
    ++epoch;
    tickets_done = 0;
    epoch_totals = {};
    if (checkpoint_due_after_epoch(epoch, global_step)) checkpoint_now();
    log->flush();
  }
  finish(epoch, global_step);
  // Every rank ends with the servers' final parameters (Trainer::model(), tests).
  if (result.stopped_by == "signal") gather_model();
  write_summary();
  log->flush();
  return result;
}

bool AsyncTrainer::State::run_segment() {
  const auto [limit, at_checkpoint] = segment_end();
  const auto t0 = Clock::now();
  std::array<double, 6> agreed = work(limit);
  segment_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  if (stop_requested()) agreed[0] = 1.0;
  comm.allreduce_sum(agreed);
  tickets_done = static_cast<std::int64_t>(agreed[1]);
  global_step += static_cast<std::int64_t>(agreed[2]);
  epoch_totals.loss_sum += agreed[3];
  epoch_totals.correct += agreed[4];
  epoch_totals.count += agreed[5];
  if (!std::isfinite(agreed[3])) {
    throw CollectiveError(fmt::format("loss became {} by step {} (epoch {}); lower --lr",
                                      std::isnan(agreed[3]) ? "NaN" : "Inf", global_step, epoch + 1));
  }
  epoch_totals.seconds = epoch_seconds();
  bool stop = agreed[0] > 0.0;
  if (stop) {
    result.stopped_by = "signal";
  } else if (config.max_steps > 0 && global_step >= config.max_steps) {
    result.stopped_by = "max_steps";
    stop = true;
  }
  if (result.stopped_by == "signal" || (at_checkpoint && tickets_done == limit)) checkpoint_now();
  return stop;
}

std::pair<std::int64_t, bool> AsyncTrainer::State::segment_end() const {
  const std::int64_t per_update = tickets_per_update();
  std::int64_t limit = tickets_per_epoch;
  if (config.max_steps > 0) limit = std::min(limit, tickets_done + (config.max_steps - global_step) * per_update);
  if (config.checkpoint_every_steps <= 0) return {limit, false};
  const std::int64_t next = (global_step / config.checkpoint_every_steps + 1) * config.checkpoint_every_steps;
  const std::int64_t at = tickets_done + (next - global_step) * per_update;
  return {std::min(limit, at), at <= limit};
}

std::array<double, 6> AsyncTrainer::State::work(std::int64_t limit) {
  std::array<double, 6> mine{};  // stop, tickets_done, updates, loss, correct, count
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
  return mine;
}

void AsyncTrainer::State::announce() {
  if (!root() || global_step != 0 || tickets_done != 0) return;
  progress->note(fmt::format(
      "ringtrain: {} on {} ({} train / {} test, {}), async: {} server(s) + {} worker(s) x batch {}, max staleness "
      "{}, {} params, {}",
      config.model, config.data.name, data.train->size(), data.test->size(), data.train->shape().str(), servers,
      workers, config.batch_size, config.max_staleness < 0 ? std::string("unbounded") : std::to_string(config.max_staleness),
      model_->num_params(), placement()));
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
  load_data_and_model();
  layout = std::make_unique<ShardLayout>(model_->num_params(), servers);
  if (config.optimizer.name == "lars" && layout->splits_a_tensor(model_->param_infos())) {
    throw std::invalid_argument("--optimizer lars needs whole tensors on each server: use --servers 1");
  }
  {
    // The full-size optimizer is built once to learn its state layout (and to validate the
    // hyper-parameters on every rank); the servers then build theirs over their shards.
    const auto full = Optimizer::create(config.optimizer, model_->param_infos(), model_->num_params());
    state_slots = model_->num_params() > 0 ? full->state().size() / model_->num_params() : 0;
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
  identify();
  run_agreed(comm, [&] { setup_local(); });
  agree_on_start();
  choose_run_dir("-async");
  channel = std::make_unique<PeerChannel>(comm);
  run_agreed(comm, [&] { start_roles(); });
  maybe_resume();
  // TensorBoard's files follow the synchronous step records only (README).
  open_logs(/*append=*/global_step > 0 || tickets_done > 0, /*tensorboard=*/false, config_json());
}

void AsyncTrainer::State::start_roles() {
  if (is_server()) {
    server = std::make_unique<ParameterServer>(*channel, *layout, config.max_staleness, config.optimizer,
                                               model_->param_infos(), *schedule, tickets_per_epoch);
    const auto p = model_->params();
    std::copy_n(p.begin() + static_cast<std::ptrdiff_t>(layout->begin(rank)), layout->size(rank),
                server->params().begin());
  } else {
    worker = std::make_unique<AsyncWorker>(*channel, *layout, config.max_staleness, *model_, *data.train,
                                           config.batch_size, config.seed,
                                           config.data.augment || config.data.crop.size > 0,  // a crop augments
                                           config.straggler_ms);
  }
}

Json AsyncTrainer::State::config_json() const {
  Json j = base_config_json();
  j.set("global_batch_size", config.max_staleness == 0 ? config.batch_size * workers : config.batch_size);
  j.set("workers", workers);
  Json shards = Json::array();
  for (int s = 0; s < servers; ++s) {
    shards.push(Json(Json::Object{{"rank", s}, {"begin", layout->begin(s)}, {"size", layout->size(s)}}));
  }
  j.set("shards", std::move(shards));
  return j;
}

void AsyncTrainer::State::gather_model() {
  if (is_server()) {
    const auto p = model_->params();
    std::copy(server->params().begin(), server->params().end(),
              p.begin() + static_cast<std::ptrdiff_t>(layout->begin(rank)));
  }
  for (int s = 0; s < servers; ++s) {
    if (layout->size(s) > 0) comm.broadcast(model_->params().subspan(layout->begin(s), layout->size(s)), s);
  }
  // Non-trained buffers (BatchNorm statistics) live on the workers: their mean.
  const auto b = model_->buffers();
  if (!b.empty()) {
    if (is_server()) std::fill(b.begin(), b.end(), 0.0f);
    comm.allreduce(b, AllreduceAlgo::kMpi, /*mean=*/false);
    const float inv = 1.0f / static_cast<float>(workers);
    for (float& x : b) x *= inv;
  }
}

}  // namespace ringtrain
