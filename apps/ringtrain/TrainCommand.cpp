// The train subcommand: its flags (grouped as --help shows them), bound into a TrainConfig,
// and the run they start. Defaults live in the config structs; --help shows them.
#include "TrainCommand.h"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "ConfigFile.h"
#include "FlagRange.h"
#include "FlagText.h"
#include "nn/Model.h"
#include "optim/LrSchedule.h"
#include "optim/Optimizer.h"
#include "run/Agreement.h"
#include "run/StopSignals.h"
#include "run/Evaluate.h"
#include "train/Trainer.h"

namespace ringtrain {
namespace {

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& entry : model_zoo()) names.push_back(entry.name);
  return names;
}

constexpr const char* kTrainFooter = R"(
Exit status:
  0   finished: the model is in <run-dir>/model.rtck (ringtrain eval --checkpoint <run-dir>/model.rtck)
  75  stopped by a signal after writing its checkpoint: resume with --resume auto (same --run-dir)
  1   runtime error (every rank says which)     2   usage error (a flag, a config file)
  128+N  killed by signal N before training started (a stop then would have nothing to save)
Signals: SIGTERM, SIGINT or SIGUSR2 stop the run after the current step with a checkpoint in
  --checkpoint-dir. Under mpirun send them to the ranks, or SIGTERM to scripts/mpirun/run.sh
  (it passes SIGUSR2 to mpirun, which forwards it at once; mpirun delays a SIGTERM by 1 s).
Threads: OpenMP threads per rank = --threads, else OMP_NUM_THREADS, else the node's cores / the
  ranks on it (from MPI); the start line shows them, and a node whose ranks x threads exceed its
  cores gets a warning.)";

}  // namespace

TrainCommand::TrainCommand(CLI::App& app) {
  auto* t = app.add_subcommand("train", "Train a model (run under mpirun -np N for N data-parallel ranks)");
  app_ = t;
  t->add_option("--config", config_file_,
                "Read options from a TOML/INI file: 'epochs = 5', keys are the long options below without the "
                "dashes; options given on the command line win. Each run writes its own as <run-dir>/config.toml")
      ->configurable(false);
  add_model_options(*t);
  add_optimisation_options(*t);
  add_distribution_options(*t);
  add_mode_options(*t);
  add_stall_options(*t);
  add_checkpoint_options(*t);
  add_logging_options(*t);
  t->footer(kTrainFooter);
}

// --help shows each group under its own heading (CLI11's option group names).
void TrainCommand::add_model_options(CLI::App& t) {
  TrainConfig& c = config_;
  t.option_defaults()->group("Model and data");
  t.add_option("--model", c.model, "Model: " + joined(model_names()) + " (see 'ringtrain models')")
      ->capture_default_str()
      ->check(CLI::IsMember(model_names()));
  t.add_option("--model-file", c.model_file,
               "Train the network of this ONNX file (torch.onnx.export in TRAINING or PRESERVE mode, opset 13-17) from "
               "its weights instead of a zoo model; checkpoints carry its graph")
      ->excludes("--model");
  t.add_flag("--init", c.init_weights, "With --model-file: initialise the weights as the zoo would, not from the file")
      ->needs("--model-file");
  data_.add(t, c.data);
  t.add_flag("--augment", c.data.augment, "Random crop (pad 4) and horizontal flip of training images");
  t.add_option("--precision", c.precision,
                "Compute: fp32, or bf16 (activations and the layers' weights in bf16 on the CPU's bf16 units, fp32 "
                "master weights, gradients, optimizer and loss; needs AVX512-BF16 or AMX)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16"}));
  t.add_option("--seed", c.seed, "Seed of initialisation, shuffling, augmentation, dropout")->capture_default_str();
  t.add_option("--loader-threads", c.loader_threads,
               "Threads per rank decoding and augmenting batches ahead of the step (default: for --dataset folder or packed the "
               "cores this node's ranks leave free, at least 1; otherwise 0, batches copied inline)")
      ->check(at_least(0));
  t.add_option("--prefetch", c.prefetch, "Batches the loader threads keep ready")->capture_default_str()->check(from_to(1, 64));
  t.add_option("--shuffle", c.shuffle,
               "Training order: exact (a full permutation every epoch) or block (--dataset packed: blocks of records "
               "in a random order, shuffled within a window of 4 blocks; each rank reads its own blocks)")
      ->capture_default_str()
      ->check(CLI::IsMember({"exact", "block"}));
  t.add_option("--shuffle-block-mb", c.shuffle_block_mb, "--shuffle block: a block's size in MB of records")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
}

void TrainCommand::add_optimisation_options(CLI::App& t) {
  TrainConfig& c = config_;
  t.option_defaults()->group("Optimisation");
  t.add_option("--epochs", c.epochs, "Epochs")->capture_default_str();
  t.add_option("--max-steps", c.max_steps, "Stop after this many optimizer steps (0: no limit)")
      ->capture_default_str();
  t.add_option("--target-accuracy", c.target_accuracy,
                "Evaluate every epoch and stop once test accuracy >= this, reporting the time (0: off)")
      ->capture_default_str();
  t.add_option("--batch-size", c.batch_size, "Batch size per rank (with --logical-shards: per shard)")
      ->capture_default_str();
  t.add_option("--global-batch-size", c.global_batch_size,
                "Samples per optimizer step over all ranks and --accumulate micro-batches, or over the --logical-shards "
                "(overrides --batch-size; must divide evenly)");
  t.add_option("--eval-batch-size", c.eval_batch_size, "Evaluation batch per rank (0: max(batch, 256))")
      ->capture_default_str();
  t.add_option("--accumulate", c.accumulate, "Micro-batches whose gradients are summed before one all-reduce")
      ->capture_default_str();
  t.add_option("--optimizer", c.optimizer.name, joined(Optimizer::known_names()))
      ->capture_default_str()
      ->check(CLI::IsMember(Optimizer::known_names()));
  t.add_option("--lr", c.schedule.base_lr, "Learning rate (before --lr-scaling)")->capture_default_str();
  t.add_option("--momentum", c.optimizer.momentum, "Momentum (sgd, lars)")->capture_default_str();
  t.add_flag("--nesterov", c.optimizer.nesterov, "Nesterov momentum (sgd)");
  t.add_option("--weight-decay", c.optimizer.weight_decay, "Weight decay")->capture_default_str();
  t.add_option("--beta1", c.optimizer.beta1, "Adam beta1")->capture_default_str();
  t.add_option("--beta2", c.optimizer.beta2, "Adam beta2")->capture_default_str();
  t.add_option("--eps", c.optimizer.eps, "Adam epsilon")->capture_default_str();
  t.add_option("--lars-eta", c.optimizer.lars_eta, "LARS trust coefficient")->capture_default_str();
  t.add_option("--lr-schedule", c.schedule.name,
                joined(LrSchedule::known_names()) + " (cosine: to --lr-min over --epochs)")
      ->capture_default_str()
      ->check(CLI::IsMember(LrSchedule::known_names()));
  t.add_option("--lr-gamma", c.schedule.gamma, "step/multistep: factor at each boundary")->capture_default_str();
  t.add_option("--lr-step-epochs", c.schedule.step_epochs, "step: epochs between decays")->capture_default_str();
  t.add_option("--lr-milestones", milestones_, "multistep: epochs where lr *= gamma, e.g. 10,20");
  t.add_option("--lr-min", c.schedule.min_lr, "cosine: final learning rate")->capture_default_str();
  t.add_option("--warmup-epochs", c.schedule.warmup_epochs, "Linear warmup epochs before the schedule")
      ->capture_default_str();
  t.add_option("--lr-scaling", c.lr_scaling,
                "none|linear: linear scales lr by global batch / --lr-base-batch (Goyal et al. 2017)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "linear"}));
  t.add_option("--lr-base-batch", c.lr_base_batch, "linear scaling: the batch --lr is for (0: --batch-size)")
      ->capture_default_str();
}

void TrainCommand::add_distribution_options(CLI::App& t) {
  TrainConfig& c = config_;
  t.option_defaults()->group("Distribution");
  const std::vector<std::string> algos = {"ring", "hier", "mpi", "ps", "rd", "rab", "auto"};
  t.add_option("--allreduce", c.allreduce,
                "Gradient all-reduce: " + joined(algos) +
                    " (auto: per bucket size, by a cost model across nodes (ring, rd, rab, and hier when a node "
                    "holds several ranks), rd/ring by size on one host; the start line and summary.json name "
                    "its choice)")
      ->capture_default_str()
      ->check(CLI::IsMember(algos));
  const std::vector<std::string> transports = {"none", "bf16", "fp16"};
  t.add_option("--compress", c.compress,
                "Gradient transport: " + joined(transports) + " (16-bit on the wire, fp32 additions; "
                "with ring, hier, ps, rab or auto)")
      ->capture_default_str()
      ->check(CLI::IsMember(transports));
  t.add_option("--bucket-mb", c.bucket_mb, "Gradient bucket size in MiB")->capture_default_str();
  t.add_option("--tuning", c.tuning,
                "Cost model parameters for --allreduce auto, as 'allreduce_bench --calibrate FILE' writes them "
                "(default: built-in, fitted to 1 Gbit links); read on every rank, which must all read the same values");
  t.add_option("--logical-shards", c.logical_shards,
                "Cut the global batch into S fixed shards of --batch-size samples (global batch S x --batch-size; "
                "--global-batch-size G gives G/S), S/N per rank, with their own samples, dropout and batch-norm "
                "statistics, and sum the gradients exactly (int64): the parameters are bit-identical at every rank "
                "count N that divides S (with equal --threads), and a checkpoint resumes mid-epoch at any such N. "
                "Gradients travel once per step as int64 through MPI_Allreduce (2x the fp32 bytes), after the last "
                "shard (no --overlap). 0: off")
      ->capture_default_str()
      ->check(at_least(0));
  // A string, so config.toml writes and reads back the same word.
  t.add_option("--overlap", overlap_,
                "Reduce each gradient bucket on a communication thread as soon as backward has finished it (off: "
                "all buckets after backward; the results are bit-identical). auto: on when the ranks span several "
                "hosts or each rank has a core to spare, off when all share one host's cores")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}));
}

// --mode and what either mode runs with (threads, an emulated straggler).
void TrainCommand::add_mode_options(CLI::App& t) {
  TrainConfig& c = config_;
  t.option_defaults()->group("Distribution");
  t.add_option("--mode", c.mode,
                "sync: every rank computes, gradients all-reduced each step; async: ranks 0..S-1 are parameter "
                "servers, the others workers that pull, compute and push without waiting for each other")
      ->capture_default_str()
      ->check(CLI::IsMember({"sync", "async"}));
  t.add_option("--servers", c.servers, "async: number of parameter-server ranks S (< ranks)")
      ->capture_default_str()
      ->check(at_least(1));
  t.add_option("--max-staleness", c.max_staleness,
                "async: a worker waits while it is more than K steps ahead of the slowest (stale-synchronous "
                "parallel); 0 is synchronous, -1 unbounded")
      ->capture_default_str()
      ->check(from_to(-1, 1 << 30));
  t.add_option("--threads", c.threads,
                "OpenMP threads per rank (default: OMP_NUM_THREADS when set, else the node's cores / the ranks on it)")
      ->check(at_least(0));
  t.add_option("--straggler-ms", c.straggler_ms,
                "Experiments: the last rank (in async mode a worker) sleeps this many milliseconds after each "
                "gradient, an emulated slower node (0: off)")
      ->capture_default_str();
  // Flags of the other mode are mistakes, not no-ops: say so before MPI starts.
  t.parse_complete_callback([this, &t] {
    if (config_.mode == "async" &&
        (t.count("--allreduce") > 0 || t.count("--bucket-mb") > 0 || t.count("--tuning") > 0)) {
      throw CLI::ValidationError("--mode async", "--allreduce, --bucket-mb and --tuning apply to --mode sync; --mode "
                                                 "async exchanges gradients through its parameter servers");
    }
    if (config_.mode == "sync" && (t.count("--servers") > 0 || t.count("--max-staleness") > 0)) {
      throw CLI::ValidationError("--mode sync", "--servers and --max-staleness apply to --mode async");
    }
  });
}

// The stall watchdog (StallWatchdog.h): when a rank blocked in MPI warns, and when the job ends.
void TrainCommand::add_stall_options(CLI::App& t) {
  t.option_defaults()->group("Distribution");
  t.add_option("--stall-warning", stall_.warning_s,
                "Seconds blocked in one MPI wait before a rank says, once per stall, where it waits (step, bucket, "
                "operation), for which peer, and which ranks hold it up, with their hosts and where they were last "
                "seen (0: never)")
      ->capture_default_str()
      ->check(at_least(0));
  t.add_option("--stall-timeout", stall_.timeout_s,
                "Seconds blocked in one MPI wait before the job ends with an error naming the stalled ranks (0: never)")
      ->capture_default_str()
      ->check(at_least(0));
  t.add_option("--stall-channel", stall_.channel,
               "The watchdogs' side channel (TCP to rank 0, outside MPI; it is how a stopped rank is named): auto "
               "(rank 0 listens on 127.0.0.1 for its own host, else on the address the others reach it at among "
               "the interfaces Open MPI's TCP transport may use), off (stalls name the awaited peer only), or the "
               "IPv4 address or interface name of rank 0's host to listen on")
      ->capture_default_str();
}

void TrainCommand::add_checkpoint_options(CLI::App& t) {
  TrainConfig& c = config_;
  t.option_defaults()->group("Checkpoints");
  t.add_option("--checkpoint-dir", c.checkpoint_dir, "Checkpoint directory (default: <run-dir>/checkpoints)");
  t.add_option("--checkpoint-every", c.checkpoint_every, "Checkpoint every N epochs (0: off)")
      ->capture_default_str();
  t.add_option("--checkpoint-every-steps", c.checkpoint_every_steps, "Checkpoint every N steps (0: off)")
      ->capture_default_str();
  t.add_option("--keep-checkpoints", c.keep_checkpoints, "Keep the newest K checkpoints (0: all)")
      ->capture_default_str();
  t.add_option("--resume", c.resume,
               "Resume from a checkpoint file, or 'auto': the newest state in --checkpoint-dir or, when newer, "
               "a RAM snapshot of this run on any node");
  t.add_option("--snapshot-every", c.snapshot_every,
               "Every N steps, the training state to each node's RAM and a copy to the next node's, off the "
               "step's path; kept (newest 2) when the run fails or is stopped, removed when it ends normally (0: off)")
      ->capture_default_str();
  t.add_option("--snapshot-dir", c.snapshot_dir,
               "Where snapshots go on every node (default: /dev/shm/ringtrain-<run id>, the id from --run-dir's path)");
}

void TrainCommand::add_logging_options(CLI::App& t) {
  TrainConfig& c = config_;
  t.option_defaults()->group("Logging and evaluation");
  t.add_option("--eval-every", c.eval_every, "Evaluate every N epochs (0: only at the end)")->capture_default_str();
  t.add_option("--log-every", c.log_every,
                "Steps per timing record in rank-<r>.jsonl and TensorBoard point (each sums its steps' phases; "
                "1: every step, for a per-step trace; the default keeps a 10-epoch LeNet-5 run's logs near 1 MB)")
      ->capture_default_str();
  t.add_option("--run-dir", c.run_dir, "Run directory (default: runs/<time>-<model>-np<N>)");
  t.add_flag("--quiet", c.quiet, "No console output but errors");
  t.add_option("--progress", c.progress,
                "Rank 0's console: a live bar on stderr (bar), one line per epoch (plain), or bar only when "
                "stderr is a terminal (auto; under mpirun it never is)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "bar", "plain"}));
  t.add_flag_callback("--no-tensorboard", [&c] { c.tensorboard = false; },
                      "Write no TensorBoard event files (<run-dir>/tensorboard/)");
}

void TrainCommand::apply_config_file() {
  if (app_->parsed() && !config_file_.empty()) ringtrain::apply_config_file(*app_, config_file_);
}

int TrainCommand::run(Communicator& comm) {
  TrainConfig config = config_;
  // Every rank reads the same flags: agreed, a bad one is the same error on every rank, each
  // printing it before leaving (an MPI_Abort from the first could end the others unheard).
  run_agreed(comm, [&] {
    config.data = data_.resolve();
    if (!milestones_.empty()) config.schedule.milestones = parse_list(milestones_, "--lr-milestones");
  });
  config.overlap = overlap_;
  // A checkpoint of a model read from ONNX carries its graph: --resume needs no --model-file.
  if (!config.resume.empty() && config.model_file.empty() && app_->count("--model") == 0) {
    if (config.resume == "auto")
      adopt_auto_resume_graph(comm, config);
    else
      adopt_checkpoint_graph(config.resume, config);
  }
  // This run's own paths stay as comments: a rerun from the file gets a new run directory
  // (and would otherwise write over this one).
  config.rerun_config =
      "# The options of this run. Rerun it with: ringtrain train --config <this file> (options given on the\n"
      "# command line win over the file).\n" +
      config_file_text(*app_, {"run-dir", "checkpoint-dir", "resume", "snapshot-dir"});
  // A stopped, hung or unreachable peer would otherwise hold this rank inside MPI for
  // ever. The watchdog's thread cannot unwind the blocked one, so a timeout prints its
  // error and leaves at once with exit 1; mpirun then ends every other rank.
  const int rank = comm.rank();
  const auto channel = open_stall_channel(comm, stall_);
  if (channel && !channel->active() && stall_.channel != "off" && rank == 0 && !config.quiet)
    fmt::print(stderr, "ringtrain: note: no stall side channel ({}); a stall names the awaited peer only\n",
               channel->note());
  const StallWatchdog watchdog(
      stall_,
      [rank](const std::string& message) {
        fmt::print(stderr, "ringtrain: [rank {}] warning: {}\n", rank, message);
        std::fflush(stderr);
      },
      [rank](const std::string& message) {
        fmt::print(stderr, "ringtrain: [rank {}] error: {}\n", rank, message);
        std::fflush(stderr);
        std::fflush(stdout);
        std::_Exit(1);
      },
      channel.get());
  Trainer trainer(config, comm);
  const TrainResult r = trainer.run();
  if (r.stopped_by == "signal") {
    // The checkpoint is written (the stop note named it): "resume me", not "done".
    if (comm.rank() == 0 && !config.quiet) {
      fmt::print("stopped by a signal after {} steps; resume with --resume auto --run-dir {} (exit {})\n", r.steps,
                 r.run_dir.string(), kExitStopped);
      // Before the exit status reaches mpirun, which then ends the ranks still exiting.
      std::fflush(stdout);
    }
    return kExitStopped;
  }
  // Ended normally: the RAM snapshots are no longer needed (a failure or a stop keeps them).
  trainer.remove_snapshots();
  if (comm.rank() == 0 && !config.quiet) {
    fmt::print("done: {} epochs, {} steps, {:.1f}s, test accuracy {:.4f}, test loss {:.4f}{}; run dir {}\n"
               "model: {} (ringtrain eval --checkpoint {})\n",
               r.epochs_completed, r.steps, r.wall_s, r.final_test_accuracy, r.final_test_loss,
               r.time_to_target_s ? fmt::format(", reached {} at {:.1f}s", config.target_accuracy, *r.time_to_target_s)
                                  : std::string(),
               r.run_dir.string(), r.model.string(), r.model.string());
  }
  return 0;
}

}  // namespace ringtrain
