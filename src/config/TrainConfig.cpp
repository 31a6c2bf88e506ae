// Validation and JSON form of TrainConfig.
#include "config/TrainConfig.h"

#include <stdexcept>

#include <fmt/format.h>

#include "common/MemoryBudget.h"

namespace ringtrain {
namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

// A JSON array of numbers (the normalisation's mean and std, the schedule's milestones).
template <class Numbers>
Json json_array(const Numbers& values) {
  Json a = Json::array();
  for (const auto v : values) a.push(v);
  return a;
}

// config.json's dataset fields, in the order they have always had (the synthetic ones only
// for synthetic data).
void set_data_fields(Json& j, const DatasetConfig& data) {
  j.set("dataset", data.name);
  j.set("data_dir", data.data_dir);
  j.set("augment", data.augment);
  j.set("normalize", data.normalize);
  j.set("mean", json_array(data.norm_mean));
  j.set("std", json_array(data.norm_std));
  if (data.name == "synthetic") {
    j.set("synthetic_shape", data.synthetic_shape.str());
    j.set("synthetic_classes", data.synthetic_classes);
    j.set("synthetic_train", data.synthetic_train);
    j.set("synthetic_test", data.synthetic_test);
    j.set("synthetic_seed", data.seed);
  }
}

}  // namespace

void TrainConfig::validate() const {
  require(epochs >= 1, fmt::format("--epochs must be >= 1 (got {})", epochs));
  require(max_steps >= 0, fmt::format("--max-steps must be >= 0 (got {})", max_steps));
  require(target_accuracy >= 0.0 && target_accuracy <= 1.0,
          fmt::format("--target-accuracy must be in [0, 1] (got {})", target_accuracy));
  require(batch_size >= 1, fmt::format("--batch-size must be >= 1 (got {})", batch_size));
  require(global_batch_size >= 0, fmt::format("--global-batch-size must be >= 0 (got {})", global_batch_size));
  require(eval_batch_size >= 0, fmt::format("--eval-batch-size must be >= 0 (got {})", eval_batch_size));
  require(accumulate >= 1, fmt::format("--accumulate must be >= 1 (got {})", accumulate));
  require(logical_shards >= 0, fmt::format("--logical-shards must be >= 0 (0: off; got {})", logical_shards));
  if (logical_shards > 0) {
    require(mode == "sync", "--logical-shards applies to --mode sync");
    require(accumulate == 1,
            "--logical-shards runs each rank's shards through the accumulation path already: leave --accumulate at 1");
    require(compress == "none", "--logical-shards sums gradients exactly in int64: leave --compress at none");
  }
  require(schedule.base_lr > 0.0, fmt::format("--lr must be > 0 (got {})", schedule.base_lr));
  require(lr_scaling == "none" || lr_scaling == "linear",
          fmt::format("--lr-scaling must be none or linear (got '{}')", lr_scaling));
  require(lr_base_batch >= 0, fmt::format("--lr-base-batch must be >= 0 (got {})", lr_base_batch));
  require(bucket_mb > 0.0, fmt::format("--bucket-mb must be > 0 (got {})", bucket_mb));
  require(overlap == "auto" || overlap == "on" || overlap == "off",
          fmt::format("--overlap must be auto, on or off (got '{}')", overlap));
  require(precision == "fp32" || precision == "bf16",
          fmt::format("--precision must be fp32 or bf16 (got '{}')", precision));
  require(compress == "none" || compress == "bf16" || compress == "fp16",
          fmt::format("--compress must be none, bf16 or fp16 (got '{}')", compress));
  require(compress == "none" || (allreduce != "rd" && allreduce != "mpi"),
          fmt::format("--compress {} needs --allreduce ring, hier, ps, rab or auto ({} moves fp32 only)", compress,
                      allreduce));
  require(eval_every >= 0, fmt::format("--eval-every must be >= 0 (got {})", eval_every));
  require(log_every >= 1, fmt::format("--log-every must be >= 1 (got {})", log_every));
  require(loader_threads >= -1, fmt::format("--loader-threads must be >= 0 (got {})", loader_threads));
  require(prefetch >= 1, fmt::format("--prefetch must be >= 1 (got {})", prefetch));
  require(!(data.augment && data.crop.size > 0),
          "--augment (pad-4 crop and flip) and --crop random-resized:SIZE are two augmentations: give one");
  require(data.crop.size == 0 || decodes_images(data.name), "--crop applies to --dataset folder or packed only");
  require(shuffle == "exact" || shuffle == "block", fmt::format("--shuffle must be exact or block (got '{}')", shuffle));
  require(shuffle == "exact" || data.name == "packed",
          "--shuffle block reads the blocks of packed shards: use it with --dataset packed");
  require(shuffle_block_mb > 0.0, fmt::format("--shuffle-block-mb must be > 0 (got {})", shuffle_block_mb));
  require(shuffle == "exact" || mode == "sync", "--shuffle block applies to --mode sync");
  require(progress == "auto" || progress == "bar" || progress == "plain",
          fmt::format("--progress must be auto, bar or plain (got '{}')", progress));
  require(checkpoint_every >= 0, fmt::format("--checkpoint-every must be >= 0 (got {})", checkpoint_every));
  require(checkpoint_every_steps >= 0,
          fmt::format("--checkpoint-every-steps must be >= 0 (got {})", checkpoint_every_steps));
  require(keep_checkpoints >= 0, fmt::format("--keep-checkpoints must be >= 0 (got {})", keep_checkpoints));
  require(snapshot_every >= 0, fmt::format("--snapshot-every must be >= 0 (0: off; got {})", snapshot_every));
  require(snapshot_every == 0 || mode == "sync", "--snapshot-every applies to --mode sync");
  require(mode == "sync" || mode == "async", fmt::format("--mode must be sync or async (got '{}')", mode));
  require(threads >= 0, fmt::format("--threads must be >= 0 (0: automatic; got {})", threads));
  require(straggler_ms >= 0.0, fmt::format("--straggler-ms must be >= 0 (got {})", straggler_ms));
  require(servers >= 1, fmt::format("--servers must be >= 1 (got {})", servers));
  require(max_staleness >= -1, fmt::format("--max-staleness must be >= 0, or -1 for unbounded (got {})", max_staleness));
  if (mode == "async") {
    require(accumulate == 1, "--accumulate applies to --mode sync (an async worker pushes every batch's gradient)");
    require(global_batch_size == 0, "--global-batch-size applies to --mode sync; give each worker's --batch-size");
    require(lr_scaling == "none", "--lr-scaling linear applies to --mode sync (it scales by the all-reduced batch)");
    require(optimizer.name != "lars" || servers == 1,
            "--optimizer lars needs whole tensors on one server: use --servers 1 with --mode async");
  }
  require(resume != "auto" || !run_dir.empty() || !checkpoint_dir.empty(),
          "--resume auto looks in the checkpoint directory of this run, and the default run directory is new "
          "every time: also pass --run-dir (or --checkpoint-dir) of the run to continue");
}

void TrainConfig::check_batch_memory(const ImageShape& sample) const {
  // The input batch is a lower bound of what a step holds (activations come on top).
  const auto need = [&](int batch, const char* flag, const char* what) {
    require_memory(saturating_product({static_cast<std::uint64_t>(batch), sample.numel(), sizeof(float)}),
                   fmt::format("{} {} ({}: {} x {} floats, activations not counted)", flag, batch, what, batch,
                               sample.str()));
  };
  need(batch_size, "--batch-size", "the training batch");
  need(eval_batch_size, "--eval-batch-size", "the evaluation batch");
}

// --dataset folder's and packed's settings: what evaluation from a checkpoint needs to see the same images.
void TrainConfig::set_folder_json(Json& j) const {
  j.set("crop", data.crop.size);
  j.set("crop_scale", Json(Json::Array{Json(data.crop.scale_min), Json(data.crop.scale_max)}));
  j.set("crop_ratio", Json(Json::Array{Json(data.crop.ratio_min), Json(data.crop.ratio_max)}));
  j.set("flip", data.crop.flip);
  j.set("channels", data.channels);
  j.set("max_pixels", static_cast<std::int64_t>(data.max_pixels));
  j.set("val_fraction", data.val_fraction);
  j.set("bad_images", data.skip_bad_images ? "skip" : "error");
  j.set("loader_threads", loader_threads);
  j.set("prefetch", prefetch);
}

Json TrainConfig::to_json() const {
  Json j = Json::object();
  j.set("model", model);
  if (!model_file.empty()) {
    j.set("model_file", model_file);
    j.set("init", init_weights);
  }
  set_data_fields(j, data);
  if (decodes_images(data.name)) set_folder_json(j);
  if (shuffle != "exact") {  // absent: exact (older files)
    j.set("shuffle", shuffle);
    j.set("shuffle_block_mb", shuffle_block_mb);
  }
  j.set("epochs", epochs);
  j.set("max_steps", max_steps);
  j.set("target_accuracy", target_accuracy);
  j.set("batch_size", batch_size);
  j.set("global_batch_size", global_batch_size);
  j.set("eval_batch_size", eval_batch_size);
  j.set("accumulate", accumulate);
  if (logical_shards > 0) j.set("logical_shards", logical_shards);  // absent: off (older files)
  j.set("optimizer", optimizer.name);
  j.set("momentum", optimizer.momentum);
  j.set("nesterov", optimizer.nesterov);
  j.set("weight_decay", optimizer.weight_decay);
  if (optimizer.name == "adam" || optimizer.name == "adamw") {
    j.set("beta1", optimizer.beta1);
    j.set("beta2", optimizer.beta2);
    j.set("eps", optimizer.eps);
  }
  if (optimizer.name == "lars") j.set("lars_eta", optimizer.lars_eta);
  j.set("lr", schedule.base_lr);
  j.set("lr_schedule", schedule.name);
  j.set("lr_gamma", schedule.gamma);
  j.set("lr_step_epochs", schedule.step_epochs);
  j.set("lr_milestones", json_array(schedule.milestones));
  j.set("lr_min", schedule.min_lr);
  j.set("warmup_epochs", schedule.warmup_epochs);
  j.set("lr_scaling", lr_scaling);
  j.set("lr_base_batch", lr_base_batch);
  j.set("seed", seed);
  j.set("allreduce", allreduce);
  j.set("tuning", tuning);
  j.set("compress", compress);
  j.set("precision", precision);
  j.set("bucket_mb", bucket_mb);
  j.set("overlap", overlap);
  j.set("mode", mode);
  if (straggler_ms > 0.0) j.set("straggler_ms", straggler_ms);
  if (mode == "async") {
    j.set("servers", servers);
    j.set("max_staleness", max_staleness);
  }
  j.set("eval_every", eval_every);
  j.set("log_every", log_every);
  j.set("tensorboard", tensorboard);
  j.set("checkpoint_every", checkpoint_every);
  j.set("checkpoint_every_steps", checkpoint_every_steps);
  j.set("keep_checkpoints", keep_checkpoints);
  j.set("resume", resume);
  j.set("snapshot_every", snapshot_every);
  j.set("snapshot_dir", snapshot_dir);
  return j;
}

std::string TrainConfig::fingerprint_text() const {
  // Everything that changes the computation. Paths, logging and resume are per-rank
  // matters (a node may keep its data elsewhere) and are left out.
  Json j = to_json();
  Json kept = Json::object();
  for (const auto& [key, value] : j.as_object()) {
    // Overlap changes when buckets travel, not which or in what order: ranks may differ.
    // The tuning file's path too: its contents are compared across ranks where it is read.
    if (key == "data_dir" || key == "model_file" || key == "snapshot_dir" || key == "tuning" || key == "resume" || key == "log_every" || key == "overlap" || key == "tensorboard" ||
        key == "loader_threads" || key == "prefetch") {  // loader threads never change a bit
      continue;
    }
    kept.set(key, value);
  }
  return kept.dump();
}

}  // namespace ringtrain
