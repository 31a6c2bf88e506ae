// What every training run does around its steps, whichever loop takes them (TrainingRun.h):
// its set-up (threads, data and model, the agreed start, run directory, logs). The epochs,
// evaluation and checkpoints are in TrainingRunEpochs.cpp, summary.json in TrainingRunSummary.cpp.
#include "run/TrainingRun.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include <fmt/format.h>

#include "checkpoint/CheckpointIo.h"
#include "common/CollectiveError.h"
#include "common/Cores.h"
#include "common/Fnv1a.h"
#include "onnx/OnnxModel.h"
#include "onnx/OnnxReader.h"
#include "run/Agreement.h"
#include "run/Versions.h"
#include "tensorboard/TensorBoardLog.h"

namespace ringtrain {
namespace {

// runs/<local time>-<model>-np<N><suffix>: rank 0's clock decides (broadcast by the caller).
std::string default_run_dir(const std::string& model, int world, std::string_view suffix) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return fmt::format("runs/{}-{}-np{}{}", stamp, model, world, suffix);
}

// The settings that tell runs apart, as a markdown table for TensorBoard's Text tab.
std::string settings_markdown(const Json& config) {
  std::string md = "| setting | value |\n|---|---|\n";
  for (const char* key : {"model", "dataset", "precision", "world_size", "threads_per_rank", "batch_size",
                          "global_batch_size", "optimizer", "lr", "allreduce", "compress", "mode", "seed"}) {
    if (const Json* v = config.find(key)) md += fmt::format("| {} | {} |\n", key, v->is_string() ? v->as_string() : v->dump());
  }
  return md;
}

}  // namespace

TrainingRun::TrainingRun(TrainConfig c, Communicator& comm_) : config(std::move(c)), comm(comm_) {}
TrainingRun::~TrainingRun() = default;

const Model& TrainingRun::model() const {
  if (!model_) throw std::logic_error("the model is built when the run starts");
  return *model_;
}

void TrainingRun::identify() {
  rank = comm.rank();
  world = comm.size();
  hosts = comm.allgather(comm.host_name());
  set_threads();
}

void TrainingRun::set_threads() {
  threads_ = choose_threads(config.threads, std::getenv("OMP_NUM_THREADS"), comm.ranks_on_node(), host_cores(),
                            affinity_cores());
  // Before any OpenMP region (the model's init and oneDNN's primitives start the team).
  omp_set_num_threads(threads_.threads);
  // Once per node: from its first rank (by host name).
  const auto first = std::find(hosts.begin(), hosts.end(), hosts[static_cast<std::size_t>(rank)]);
  if (config.quiet || first - hosts.begin() != rank) return;
  if (const auto warning = oversubscription_warning(comm.ranks_on_node(), threads_.threads, host_cores())) {
    fmt::print(stderr, "ringtrain: [rank {}] warning: {} (threads from {})\n", rank, *warning, threads_.source);
    std::fflush(stderr);
  }
}

int TrainingRun::loader_threads() const {
  if (config.loader_threads >= 0) return config.loader_threads;
  // Decoding images is the work loader threads are for; copying an in-memory set's bytes
  // is not worth a thread beside the compute team.
  if (!decodes_images(config.data.name)) return 0;
  return std::max(1, host_cores() - comm.ranks_on_node());
}

std::string TrainingRun::placement() const {
  return fmt::format("{} compute, {} thread(s) per rank, run dir {}, model -> {}", config.precision,
                     threads_.threads, run_dir.string(), model_path().string());
}

void TrainingRun::load_data_and_model() {
  // Before the data: a CPU without native bf16 is refused at once (on every rank, agreed).
  const Precision precision = parse_precision(config.precision);
  if (const std::string why = precision_refusal_here(precision); !why.empty()) throw std::invalid_argument(why);
  if (config.eval_batch_size == 0) config.eval_batch_size = std::max(config.batch_size, 256);
  // The cosine schedule anneals over the whole run, whoever built the configuration.
  config.schedule.total_epochs = config.epochs;
  data = load_dataset(config.data);
  config.check_batch_memory(data.train->shape());  // sizes from flags, before any allocation
  if (!config.model_file.empty()) {
    load_model_file();
  } else if (!config.model_graph.empty()) {
    // A resume of a model read from ONNX: its checkpoint's graph; the weights come with the resume.
    Json meta = Json::object();
    meta.set("model", config.model);
    meta.set("model_graph", config.model_graph);
    model_ = std::make_unique<Model>(checkpoint_model(meta, data.train->shape(), data.train->classes(), config.resume));
  } else {
    model_ = std::make_unique<Model>(config.model, data.train->shape(), data.train->classes());
    model_->init(config.seed);
  }
  model_->set_precision(precision);
  schedule = std::make_unique<LrSchedule>(config.schedule);
}

void TrainingRun::load_model_file() {
  // Every rank reads the file: the same bytes give the same error, or the same model.
  OnnxNetwork net = read_onnx(config.model_file);
  const bool has_batchnorm = net.has_batchnorm;
  model_ = std::make_unique<Model>(onnx_model(std::move(net)));
  const ImageShape in = model_->input_shape();
  if (in != data.train->shape() || model_->classes() != data.train->classes())
    throw std::invalid_argument(fmt::format("--model-file {}: the graph takes {} and gives {} classes, the data has {} "
                                            "and {} classes",
                                            config.model_file, in.str(), model_->classes(), data.train->shape().str(),
                                            data.train->classes()));
  if (config.init_weights) model_->init(config.seed);
  config.model = model_->name();
  config.model_graph = checkpoint_graph(*model_);
  if (!has_batchnorm && comm.rank() == 0)
    fmt::print(stderr, "ringtrain: warning: --model-file {}: the graph has no batch norm (an eval-mode export folds it "
                       "into the convolutions; export with training=TrainingMode.TRAINING to train)\n",
               config.model_file);
}

void TrainingRun::agree_on_start() {
  // Before any collective whose size depends on the model: ranks with other flags or data
  // shapes would otherwise meet in a broadcast of different lengths.
  const std::string text = config.fingerprint_text() + "\n" + model_->signature();
  const std::vector<std::uint64_t> all = comm.allgather(fnv1a64(text));
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
  // Same start everywhere: rank 0's parameters (identical anyway from the seed, but a
  // broadcast makes that a guarantee rather than an assumption).
  comm.broadcast(model_->params(), 0);
  if (!model_->buffers().empty()) comm.broadcast(model_->buffers(), 0);
}

void TrainingRun::choose_run_dir(std::string_view suffix) {
  // One run directory name for all ranks: rank 0's clock decides.
  const std::string dir = config.run_dir.empty() ? default_run_dir(config.model, world, suffix) : config.run_dir;
  run_dir = broadcast_string(comm, dir, 0);
  checkpoint_dir = config.checkpoint_dir.empty() ? run_dir / "checkpoints" : std::filesystem::path(config.checkpoint_dir);
}

Json TrainingRun::base_config_json() const {
  // The data as loaded: the default directory, and the mean/std computed from the training
  // set when no flag gave them (the checkpoint's config keeps the flags' values).
  TrainConfig loaded = config;
  loaded.data.data_dir = data.data_dir;
  loaded.data.norm_mean = data.norm_mean;
  loaded.data.norm_std = data.norm_std;
  Json j = loaded.to_json();
  j.set("batch_size", config.batch_size);
  j.set("lr_effective", config.schedule.base_lr);
  j.set("eval_batch_size", config.eval_batch_size);
  j.set("world_size", world);
  Json hs = Json::array();
  for (const auto& h : hosts) hs.push(h);
  j.set("hosts", std::move(hs));
  j.set("threads_per_rank", threads_per_rank());
  j.set("threads_from", threads_.source);
  j.set("input_shape", data.train->shape().str());
  j.set("classes", data.train->classes());
  j.set("train_samples", data.train->size());
  j.set("test_samples", data.test->size());
  j.set("num_params", model_->num_params());
  j.set("flops_per_image", model_->flops_per_image());
  j.set("checkpoint_dir", checkpoint_dir.string());
  return j;
}

void TrainingRun::open_logs(bool append, bool tensorboard, const Json& config_json) {
  // The library versions are gathered from every rank (a collective), before the agreed part.
  const std::string versions = root() ? versions_json(comm).dump() : std::string();
  run_agreed(comm, [&] {
    log = std::make_unique<RunLog>(run_dir, rank, root(), append);
    if (tensorboard) {
      auto tb = std::make_unique<TensorBoardLog>(run_dir, rank, world, append);
      if (!append) tb->text("run/config", settings_markdown(config_json));
      log->add_sink(std::move(tb));
    }
    progress = std::make_unique<Progress>(root() && !config.quiet, config.epochs, Progress::parse_style(config.progress));
    if (!root()) return;
    Json j = config_json;
    j.set("versions", Json::parse(versions));
    log->write_json("config.json", j);
    if (!config.rerun_config.empty()) log->write_text("config.toml", config.rerun_config);
  });
}

}  // namespace ringtrain
