// The ringtrain subcommands: train (TrainCommand.h), eval, and the local ones (models,
// datasets, inspect, export, trace). Defaults live in the config structs; --help shows them.
#include "Commands.h"

#include <cstdio>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "FlagRange.h"
#include "FlagText.h"
#include "datasets/BatchLoader.h"
#include "datasets/DatasetReport.h"
#include "datasets/FolderReport.h"
#include "export/OnnxExport.h"
#include "common/Json.h"
#include "nn/Model.h"
#include "nn/PlanReport.h"
#include "onnx/OnnxModel.h"
#include "onnx/OnnxReader.h"
#include "run/Agreement.h"
#include "run/Evaluate.h"
#include "run/NpyFile.h"
#include "trace/Trace.h"
#include "train/Trainer.h"

namespace ringtrain {

Commands::Commands(CLI::App& app) : train_(app), pack_(app) {
  add_eval(app);
  add_local(app);
}

void Commands::add_eval(CLI::App& app) {
  auto* e = app.add_subcommand(
      "eval",
      "Evaluate a checkpoint on the test split of the data it was trained on, or of --dataset and its "
      "options when given; or the network and weights of an ONNX file (under mpirun: sharded, exact)");
  eval_ = e;
  auto* checkpoint = e->add_option("--checkpoint", eval_checkpoint_, "Checkpoint file");
  auto* file = e->add_option("--model-file", eval_model_file_,
                             "ONNX file to evaluate instead of a checkpoint (its weights, on --dataset's test split)");
  checkpoint->excludes(file);
  file->excludes(checkpoint);
  e->add_flag("--json", eval_json_, "Print the result as one JSON object, loss and accuracy at full precision");
  e->add_option("--logits", eval_logits_,
                "Also write every test sample's logits to this file, as NumPy .npy (float32, shape (samples, "
                "classes), row i = test sample i; numpy.load reads it)");
  eval_data_options_.add(*e, eval_data_);
  e->add_option("--batch-size", eval_batch_, "Batch size per rank")->capture_default_str()->check(at_least(1));
}

void Commands::add_local(CLI::App& app) {
  models_ = app.add_subcommand("models", "List the model zoo with parameter counts and FLOPs per image");
  models_->add_option("--input", models_shape_, "Input shape CxHxW (default: each model's usual dataset shape)");
  models_->add_option("--classes", models_classes_, "Number of classes")
      ->capture_default_str()
      ->check(at_least(2));
  models_->add_option("--model-file", models_file_, "Describe the network of this ONNX file instead of the zoo");
  models_->add_option("--model", models_name_, "Only this model (an input it cannot take is then an error)")
      ->check(CLI::IsMember([] {
        std::vector<std::string> names;
        for (const auto& entry : model_zoo()) names.push_back(entry.name);
        return names;
      }()));

  models_->add_flag("--plan", models_plan_,
                    "Print each model's training plan: execution order, fusions, layouts, reorders per step and "
                    "activation memory");
  models_->add_option("--plan-batch", models_plan_batch_, "--plan: batch size")->capture_default_str()->check(at_least(1));
  models_->add_flag("--no-fusions", models_no_fusions_, "--plan: without the conv/batch norm + ReLU fusions");

  datasets_ = app.add_subcommand("datasets", "Describe a dataset: counts, shape, class histogram, mean/std");
  datasets_options_.add(*datasets_, datasets_data_);
  datasets_->add_flag("--time", datasets_time_,
                      "Folder, packed: decode and augment one training epoch as training would, and print images/s");
  datasets_->add_flag("--augment", datasets_data_.augment, "As train's --augment (for --time)");
  datasets_->add_option("--loader-threads", datasets_loader_threads_, "--time: loader threads (default: cores - 1)")
      ->check(at_least(1));
  datasets_->add_option("--batch-size", datasets_batch_, "--time: batch size")->capture_default_str()->check(at_least(1));
  datasets_->add_option("--seed", datasets_seed_, "--time: the seed of the epoch's order and augmentation")
      ->capture_default_str();

  inspect_ = app.add_subcommand("inspect", "Validate a checkpoint and print its header");
  inspect_->add_option("checkpoint", inspect_path_, "Checkpoint file")->required();

  export_ = app.add_subcommand(
      "export", fmt::format("Write a checkpoint's model as ONNX (opset {}): input (N, C, H, W) normalised as in "
                            "training, output logits (N, classes); dropout as Identity, batch norm on running statistics",
                            kOnnxOpset));
  auto* from_checkpoint =
      export_->add_option("--checkpoint", export_checkpoint_, "Checkpoint file, e.g. <run-dir>/model.rtck");
  auto* from_file = export_->add_option("--model-file", export_model_file_,
                                        "ONNX file to read and write back (its supported ops, untrained)");
  from_checkpoint->excludes(from_file);
  from_file->excludes(from_checkpoint);
  export_->add_option("--onnx", export_onnx_, "Output file (written whole or not at all)")->required();

  trace_ = app.add_subcommand("trace", "Merge a run's rank logs into one Chrome trace (trace.json)");
  trace_->add_option("run_dir", trace_dir_, "Run directory")->required();
  trace_->add_option("-o,--output", trace_out_, "Output file (default: <run_dir>/trace.json)");
}

bool Commands::needs_mpi() const { return train_.parsed() || eval_->parsed(); }

void Commands::apply_config_file() { train_.apply_config_file(); }

bool Commands::stops_on_signal() const { return train_.parsed(); }

int Commands::run_datasets() {
  const DatasetConfig config = datasets_options_.resolve();
  if (!decodes_images(config.name)) {
    if (datasets_time_) throw std::invalid_argument("--time: only --dataset folder or packed decode their images");
    fmt::print("{}", format_dataset_report(describe_dataset(config.name, load_dataset(config))));
    return 0;
  }
  const DatasetSplits splits = load_dataset(config);
  fmt::print("{}", config.name == "folder" ? describe_folder(splits) : describe_packed(splits));
  if (datasets_time_) {
    const int threads = datasets_loader_threads_ > 0 ? datasets_loader_threads_ : default_loader_threads(1);
    const FolderTiming t = time_folder_epoch(*splits.train, datasets_seed_, threads, datasets_batch_);
    fmt::print("one epoch: {} images decoded and augmented in {:.2f} s on {} loader thread(s): {:.0f} images/s\n", t.images,
               t.seconds, t.threads, t.seconds > 0 ? static_cast<double>(t.images) / t.seconds : 0.0);
  }
  return 0;
}

// The zoo at each model's usual shape or --input, --classes outputs.
int Commands::list_models() const {
  // Printed whole at the end, so an error is the only output.
  std::string table = models_plan_ ? "" : fmt::format("{:<12} {:>10} {:>14} {:>12}  {}\n", "model", "input", "params",
                                                       "MFLOP/image", "description");
  for (const auto& entry : model_zoo()) {
    if (!models_name_.empty() && entry.name != models_name_) continue;
    ImageShape shape{3, 32, 32};
    if (entry.name == "logreg" || entry.name == "lenet5" || entry.name == "resnet20" || entry.name == "resnet56")
      shape = {1, 28, 28};
    if (!models_shape_.empty()) shape = parse_shape(models_shape_, "--input");
    try {
      Model model(entry.name, shape, models_classes_);
      if (models_plan_) {
        model.set_fusions(!models_no_fusions_);
        table += describe_plan(model, models_plan_batch_) + "\n";
        continue;
      }
      table += fmt::format("{:<12} {:>10} {:>14} {:>12.2f}  {}\n", entry.name, shape.str(), model.num_params(),
                           model.flops_per_image() / 1e6, entry.description);
    } catch (const std::invalid_argument& e) {
      // Asked for this model alone: the input is wrong. In the whole list, one model that cannot
      // take the shape (vgg11 below 32x32) is no reason to hide the others.
      if (!models_name_.empty()) throw std::invalid_argument(fmt::format("--input {}: {}", shape.str(), e.what()));
      table += fmt::format("{:<12} {:>10} {:>14} {:>12}  {}\n", entry.name, shape.str(), "-", "-", e.what());
    }
  }
  fmt::print("{}", table);
  return 0;
}

// One ONNX file's network: its layers, parameters, FLOPs.
int Commands::describe_model_file() const {
  OnnxNetwork net = read_onnx(models_file_);
  const bool has_batchnorm = net.has_batchnorm;
  Model model = onnx_model(std::move(net));
  if (models_plan_) {
    model.set_fusions(!models_no_fusions_);
    fmt::print("{}\n", describe_plan(model, models_plan_batch_));
    return 0;
  }
  fmt::print("{}", model.signature());
  fmt::print("{}: {}, input N x {}, {} classes, {} params, {:.2f} MFLOP/image{}\n", models_file_, model.name(),
             model.input_shape().str(), model.classes(), model.num_params(), model.flops_per_image() / 1e6,
             has_batchnorm ? "" : " (no batch norm: an eval-mode export?)");
  return 0;
}

int Commands::run_local() {
  if (models_->parsed()) return models_file_.empty() ? list_models() : describe_model_file();
  if (datasets_->parsed()) return run_datasets();
  if (pack_.parsed()) return pack_.run();
  if (inspect_->parsed()) {
    fmt::print("{}\n", describe_checkpoint(inspect_path_).dump(2));
    return 0;
  }
  if (export_->parsed()) {
    if (export_checkpoint_.empty() == export_model_file_.empty())
      throw std::invalid_argument("export: give --checkpoint or --model-file");
    const Model model = export_checkpoint_.empty() ? onnx_model(read_onnx(export_model_file_)) : load_model(export_checkpoint_);
    write_onnx(model, export_onnx_);
    const ImageShape in = model.input_shape();
    fmt::print("wrote {}: {} ({} params), ONNX opset {}, input N x {}, output N x {} logits\n", export_onnx_,
               model.name(), model.num_params(), kOnnxOpset, in.str(), model.classes());
    return 0;
  }
  if (trace_->parsed()) {
    std::vector<std::string> warnings;
    const auto [path, events] = write_trace(trace_dir_, trace_out_, warnings);
    for (const auto& w : warnings) fmt::print(stderr, "ringtrain: warning: {}\n", w);
    fmt::print("wrote {} ({} events): open it in https://ui.perfetto.dev or chrome://tracing\n", path.string(), events);
    return 0;
  }
  return 2;
}

int Commands::run_distributed(Communicator& comm) {
  if (train_.parsed()) return train_.run(comm);
  if (eval_->parsed()) {
    // Without --dataset, the checkpoint's own dataset configuration.
    if (eval_checkpoint_.empty() == eval_model_file_.empty())
      throw std::invalid_argument("eval: give --checkpoint or --model-file");
    std::optional<DatasetConfig> data;
    run_agreed(comm, [&] {  // a bad flag: the same error on every rank, none lost to an abort
      if (eval_->count("--dataset") > 0 || !eval_model_file_.empty()) data = eval_data_options_.resolve();
      // Found out before the evaluation, not after it.
      const std::filesystem::path dir = std::filesystem::path(eval_logits_).parent_path();
      if (!eval_logits_.empty() && !dir.empty() && !std::filesystem::is_directory(dir))
        throw std::invalid_argument(fmt::format("--logits {}: the directory {} does not exist", eval_logits_, dir.string()));
    });
    const std::string& source = eval_checkpoint_.empty() ? eval_model_file_ : eval_checkpoint_;
    std::vector<float> logits;
    std::vector<float>* want = eval_logits_.empty() ? nullptr : &logits;
    const EvalResult r = eval_checkpoint_.empty() ? evaluate_model_file(comm, eval_model_file_, *data, eval_batch_, want)
                                                  : evaluate_checkpoint(comm, eval_checkpoint_, data, eval_batch_, want);
    // Rank 0 alone holds the gathered logits; a failure to write ends every rank (main aborts).
    const std::size_t classes = logits.size() / std::max<std::size_t>(r.samples, 1);
    if (want != nullptr && comm.rank() == 0) write_npy(eval_logits_, r.samples, classes, logits);
    if (comm.rank() == 0 && eval_json_) {
      Json j = Json::object();
      j.set(eval_checkpoint_.empty() ? "model_file" : "checkpoint", source);
      j.set("model", r.model);
      j.set("samples", r.samples);
      j.set("loss", r.loss);
      j.set("accuracy", r.accuracy);
      if (want != nullptr) j.set("logits_file", eval_logits_);
      fmt::print("{}\n", j.dump());
    } else if (comm.rank() == 0) {
      fmt::print("{}: model {}, {} test samples, loss {:.4f}, accuracy {:.4f}\n", source, r.model,
                 r.samples, r.loss, r.accuracy);
      if (want != nullptr) fmt::print("wrote {}: logits, {} x {} float32 (.npy)\n", eval_logits_, r.samples, classes);
    }
    return 0;
  }
  return 2;
}

}  // namespace ringtrain
