#!/usr/bin/python3
"""Driver of scripts/bench/train_throughput.sh: ringtrain vs PyTorch 1.13 on the same CPU work.

For each model it runs ringtrain and the PyTorch baseline (torch_train.py) on the same
synthetic data, batch, step count and thread count, interleaved and repeated (the order flips
every repeat, ABBA, so slow drifts in machine load hit both sides alike), and reports medians,
spreads and ringtrain/PyTorch ratios computed pairwise within each repeat. A single-thread
GEMM measures the machine's FP32 peak so each model's fraction of peak can be stated.

Neither side is required: without torch it prints ringtrain-only figures, without the
ringtrain binary PyTorch-only figures. Tests never call this.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts", "plot"))
import rundata  # noqa: E402  (the one reader of ringtrain run directories)
import torch_train  # noqa: E402  (pure-Python specs; does not import torch)

DEFAULT_MODELS = ["logreg", "mlp", "lenet5"]
# Per-rank batch sizes of the benchmark table.
DEFAULT_BATCH = {"logreg": 64, "lenet5": 64, "mlp": 32, "vgg11": 32, "svhn-cnn": 64,
                 "alexnet": 32}
# Timed steps per model: enough for a few seconds of work each at one thread on this class of
# machine (vgg11 b32 is ~0.25 s/step, lenet5 b64 ~5 ms/step).
DEFAULT_STEPS = {"logreg": 600, "lenet5": 200, "mlp": 150, "vgg11": 20, "svhn-cnn": 200,
                 "alexnet": 20}
DEFAULT_WARMUP = {"logreg": 20, "lenet5": 10, "mlp": 10, "vgg11": 3, "svhn-cnn": 10,
                  "alexnet": 3}

MPI_ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# ringtrain invocation: the ONE place that knows the CLI. Adjust here when flags change.
# ---------------------------------------------------------------------------------------------

def ringtrain_command(binary, work, np_, run_dir):
    """argv of one `ringtrain train` run of a work item (see Work) on np_ ranks."""
    return [binary, "train",
            "--model", work.model,
            "--dataset", "synthetic",
            "--synthetic-shape", work.shape_str,
            "--synthetic-train", str(work.n_train),
            "--synthetic-test", str(work.n_test),
            "--batch-size", str(work.batch),
            "--epochs", str(work.epochs(np_)),
            "--max-steps", str(work.warmup + work.steps),
            "--lr", str(work.lr),
            "--momentum", str(work.momentum),
            "--seed", str(work.seed),
            "--eval-every", "0",  # evaluate only at the end, after the timed steps
            # A record per step, so the timed window opens exactly where the warm-up ends
            # (rundata.Run.throughput_after_warmup) rather than at the next tenth step.
            "--log-every", "1",
            "--eval-batch-size", str(work.batch),  # same as PyTorch's final eval
            "--run-dir", run_dir,
            "--no-tensorboard",  # PyTorch's side writes no event files either
            "--precision", work.precision,
            "--quiet"]


def ringtrain_model_info(binary, model, shape_str):
    """(params, forward FLOPs per image) from `ringtrain models --input CxHxW`, or None.

    Its table: model, input, params, MFLOP/image (forward, 2 x MACs), description."""
    try:
        out = subprocess.run([binary, "models", "--input", shape_str], capture_output=True,
                             text=True, timeout=120, env={**os.environ, **MPI_ROOT_ENV})
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.stdout.splitlines():
        cols = line.split()
        if len(cols) >= 4 and cols[0] == model and cols[1] == shape_str:
            try:
                return int(cols[2].replace(",", "")), float(cols[3]) * 1e6
            except ValueError:
                return None
    return None


def ringtrain_launch(argv, np_, mpirun_args):
    """Wrap a ringtrain argv for N ranks (np 1 runs the binary directly, as a user would)."""
    if np_ == 1:
        return argv
    cmd = ["mpirun", "-np", str(np_), "-x", "OMP_NUM_THREADS"] + mpirun_args
    if np_ > (os.cpu_count() or 1):
        cmd.append("--oversubscribe")
    return cmd + argv


class Work:
    """One model's benchmark work, identical for both frameworks."""

    def __init__(self, model, batch, steps, warmup, max_np, args, precision="fp32"):
        self.model = model
        # fp32, or bf16: ringtrain --precision bf16 against PyTorch under CPU autocast bf16.
        self.precision = precision
        self.key = model if precision == "fp32" else f"{model}/{precision}"
        self.shape = torch_train.NATURAL_SHAPE[model]
        self.shape_str = "x".join(map(str, self.shape))
        self.batch = batch
        self.steps = steps
        self.warmup = warmup
        # Same in-memory data for every run of this model (np 1 and np N alike), so peak RSS
        # compares like with like. Enough images for one epoch of all steps at max_np ranks,
        # but at most data_mb of pixels, so the data set does not dominate peak RSS; longer
        # runs take several epochs (ringtrain's end-of-epoch eval of n_test images is taken
        # out of its timed window, see rundata.Run.throughput_after_warmup).
        global_batch = batch * max_np
        image_bytes = 4 * self.shape[0] * self.shape[1] * self.shape[2]
        cap = max(1, int(args.data_mb * 2**20 / image_bytes) // global_batch)
        self.n_train = global_batch * min(warmup + steps, cap)
        self.n_test = global_batch
        self.data_mb = self.n_train * image_bytes / 2**20
        self.lr = args.lr
        self.momentum = args.momentum
        self.seed = args.seed
        self.vgg_conv_bias = not args.vgg_no_conv_bias
        self.desc = torch_train.describe(model, self.shape, self.vgg_conv_bias)

    def epochs(self, np_):
        """Epochs that cover warm-up + timed steps on np_ ranks (--max-steps stops the run)."""
        per_epoch = self.n_train // (self.batch * np_)
        return -(-(self.warmup + self.steps) // per_epoch)


# ---------------------------------------------------------------------------------------------
# Running things
# ---------------------------------------------------------------------------------------------

def run(cmd, env_extra, timeout):
    """Run cmd in its own process group; return (rc, stdout, stderr, seconds)."""
    env = dict(os.environ)
    env.update(env_extra)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the group we started: mpirun and its ranks
        out, err = proc.communicate()
        return 124, out, err + f"\n(timed out after {timeout} s)", time.perf_counter() - t0
    return proc.returncode, out, err, time.perf_counter() - t0


def last_json_line(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON line in output")


def tail(text, n=8):
    return "\n".join(text.strip().splitlines()[-n:])


def torch_available(python):
    rc = subprocess.run([python, "-c", "import torch"], stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL).returncode
    return rc == 0


def run_torch(args, work, np_):
    cmd = [args.python, os.path.join(HERE, "torch_train.py"),
           "--model", work.model, "--batch-size", str(work.batch),
           "--steps", str(work.steps), "--warmup", str(work.warmup),
           "--synthetic-train", str(work.n_train), "--lr", str(work.lr),
           "--momentum", str(work.momentum), "--seed", str(work.seed), "--threads", "1",
           "--final-eval", str(work.n_test),  # ringtrain always evaluates at the end
           "--autocast", "bf16" if work.precision == "bf16" else "none"]
    if np_ > 1:
        cmd += ["--ddp", "--nproc", str(np_)]
    if not work.vgg_conv_bias:
        cmd.append("--vgg-no-conv-bias")
    rc, out, err, secs = run(cmd, {"OMP_NUM_THREADS": "1"}, args.timeout)
    if rc != 0:
        return {"ok": False, "error": f"exit {rc}: {tail(err)}", "cmd": cmd}
    rec = last_json_line(out)
    rec.update({"ok": True, "cmd": cmd, "ranks_peak_rss_mb": [r["peak_rss_mb"]
                                                                for r in rec["ranks"]]})
    return rec


def run_ringtrain(args, work, np_, run_root):
    run_dir = os.path.join(run_root, f"{work.model}-np{np_}-{time.time_ns()}")
    cmd = ringtrain_launch(ringtrain_command(args.bin, work, np_, run_dir), np_, args.mpirun_args)
    # The root permission is harmless without root and lets np 1 (MPI singleton) and mpirun
    # start in containers that run as root.
    env = {"OMP_NUM_THREADS": "1", **MPI_ROOT_ENV}
    rc, out, err, secs = run(cmd, env, args.timeout)
    result = rundata.Run(run_dir)
    if rc != 0 or not result.summary_file:
        why = f"exit {rc}" if rc != 0 else f"no {os.path.join(run_dir, 'summary.json')}"
        return {"ok": False, "error": f"{why}: {tail(err or out)}", "cmd": cmd}
    summary = result.summary()
    ranks = summary.get("ranks", [])
    rec = {"ok": True, "framework": "ringtrain", "cmd": cmd, "run_dir": run_dir,
           "model": work.model, "world_size": np_, "batch_size": work.batch,
           "wall_s": summary.get("wall_s"),
           "ranks_peak_rss_mb": [r.get("peak_rss_mb") for r in ranks],
           "phases_s": [r.get("phases_s") for r in ranks]}
    windowed = result.throughput_after_warmup(work.warmup, work.batch, np_)
    if windowed:
        rec.update(windowed)
    else:
        rec.update({"images_per_s": summary.get("images_per_s"),
                    "throughput_source": "summary.json (includes warm-up)"})
    if ranks and ranks[0].get("phases_s") and ranks[0].get("wall_s"):
        # Where rank 0's time went (whole run, warm-up included): the all-reduce share and
        # the part of it spent blocked on peers.
        ph = ranks[0]["phases_s"]
        rec["allreduce_share"] = ph.get("allreduce", 0.0) / ranks[0]["wall_s"]
        rec["wait_share"] = ph.get("wait", 0.0) / ranks[0]["wall_s"]
        rec["mean_cpu_percent"] = ranks[0].get("mean_cpu_percent")
    rss = [v for v in rec["ranks_peak_rss_mb"] if v is not None]
    rec["peak_rss_mb"] = max(rss) if rss else None
    # Cross-check the architecture when the run states its parameter count.
    config = result.config
    if config:
        n = config.get("num_params")
        if isinstance(n, int) and n != work.desc["params"]:
            log(f"WARNING: ringtrain {work.model} has {n} parameters, "
                f"the PyTorch baseline {work.desc['params']}: not the same model")
        rec["threads_per_rank"] = config.get("threads_per_rank")
    if not args.keep_runs:
        shutil.rmtree(run_dir, ignore_errors=True)
    return rec


def check_architecture(binary, work, notes):
    """Compare ringtrain's own parameter and forward-FLOP counts with the baseline's spec;
    a mismatch means the two sides do not train the same model, which the report must say."""
    info = ringtrain_model_info(binary, work.model, work.shape_str)
    if info is None:
        log(f"note: no `ringtrain models` row for {work.model} {work.shape_str}; "
            "FLOPs per image from torch_train.py's spec")
        return
    params, fwd = info
    want_params, want_fwd = work.desc["params"], work.desc["forward_flops_per_image"]
    # `models` prints MFLOP with 2 decimals: allow that rounding.
    if params != want_params or abs(fwd - want_fwd) > 0.006e6 + 1e-3 * want_fwd:
        msg = (f"ARCHITECTURE MISMATCH {work.model} {work.shape_str}: ringtrain {params} params "
               f"{fwd / 1e6:.2f} MFLOP fwd, PyTorch baseline {want_params} params "
               f"{want_fwd / 1e6:.2f} MFLOP fwd")
        print(msg, flush=True)
        notes.append(msg)
    else:
        log(f"{work.model} {work.shape_str}: ringtrain and baseline agree: {params} params, "
            f"{fwd / 1e6:.2f} MFLOP forward per image")


def measure_peak(args):
    cmd = [args.python, os.path.join(HERE, "torch_train.py"), "--sgemm", str(args.sgemm_n),
           "--threads", "1"]
    rc, out, err, _ = run(cmd, {"OMP_NUM_THREADS": "1"}, args.timeout)
    if rc != 0:
        log(f"sgemm failed: {tail(err)}")
        return None
    return last_json_line(out)


# ---------------------------------------------------------------------------------------------
# Statistics and report
# ---------------------------------------------------------------------------------------------

def spread(values):
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def fmt_spread(s, digits=0):
    if not s:
        return "-"
    f = f"{{:,.{digits}f}}"
    if s["n"] == 1:
        return f.format(s["median"])
    return f"{f.format(s['median'])} [{f.format(s['min'])}-{f.format(s['max'])}]"


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def paired_ratios(a_runs, b_runs, key):
    out = []
    for a, b in zip(a_runs, b_runs):
        if a and b and a.get("ok") and b.get("ok") and a.get(key) and b.get(key):
            out.append(a[key] / b[key])
    return spread(out)


def values(runs, key):
    return [r.get(key) for r in runs if r and r.get("ok")]


def summarise(results, works, nps, peak_gflops):
    """Per model and rank count: medians, spreads, paired ratios, fraction of peak."""
    rows = []
    for w in works:
        for np_ in nps:
            rt = results[(w.key, "ringtrain", np_)]
            pt = results[(w.key, "pytorch", np_)]
            row = {"model": w.model, "precision": w.precision, "shape": w.shape_str, "np": np_, "batch": w.batch,
                   "steps": w.steps, "warmup": w.warmup, "params": w.desc["params"],
                   "train_mflop_per_image": w.desc["train_flops_per_image"] / 1e6,
                   "ringtrain_images_per_s": spread(values(rt, "images_per_s")),
                   "pytorch_images_per_s": spread(values(pt, "images_per_s")),
                   "ratio_images_per_s": paired_ratios(rt, pt, "images_per_s"),
                   "pytorch_images_per_cpu_s": spread(values(pt, "images_per_cpu_s")),
                   "ringtrain_allreduce_share": spread(values(rt, "allreduce_share")),
                   "ringtrain_wait_share": spread(values(rt, "wait_share")),
                   "ringtrain_cpu_percent": spread(values(rt, "mean_cpu_percent")),
                   "ringtrain_peak_rss_mb": spread(values(rt, "peak_rss_mb")),
                   "pytorch_peak_rss_mb": spread(values(pt, "peak_rss_mb")),
                   "pytorch_import_rss_mb": spread(
                       [r["ranks"][0]["rss_after_import_mb"] for r in pt if r and r.get("ok")]),
                   "data_mb": w.data_mb,
                   "ratio_peak_rss": paired_ratios(rt, pt, "peak_rss_mb"),
                   "ringtrain_errors": [r["error"] for r in rt if r and not r.get("ok")],
                   "pytorch_errors": [r["error"] for r in pt if r and not r.get("ok")]}
            rt_ips, pt_ips = row["ringtrain_images_per_s"], row["pytorch_images_per_s"]
            # Contention only slows a run down, so the best of the repeats estimates the
            # unloaded figure; their ratio complements the paired median.
            row["ratio_best_images_per_s"] = (rt_ips["max"] / pt_ips["max"]
                                              if rt_ips and pt_ips else None)
            for side in ("ringtrain", "pytorch"):
                ips = row[f"{side}_images_per_s"]
                row[f"{side}_pct_of_peak"] = (
                    100.0 * w.desc["train_flops_per_image"] * ips["median"]
                    / (peak_gflops * 1e9 * np_) if ips and peak_gflops else None)
            if np_ > 1:
                for side in ("ringtrain", "pytorch"):
                    # Scaling efficiency = images/s at np N / (N x images/s at np 1), paired
                    # within each repeat.
                    one = results[(w.key, side, 1)]
                    many = results[(w.key, side, np_)]
                    effs = [m["images_per_s"] / (np_ * o["images_per_s"])
                            for o, m in zip(one, many)
                            if o and m and o.get("ok") and m.get("ok")]
                    row[f"{side}_scaling_efficiency"] = spread(effs)
            if w.precision != "fp32" and any(o.key == w.model for o in works):
                # bf16 / fp32 of the same side, paired within each repeat.
                for side in ("ringtrain", "pytorch"):
                    row[f"{side}_ratio_to_fp32"] = paired_ratios(
                        results[(w.key, side, np_)], results[(w.model, side, np_)], "images_per_s")
                    row[f"{side}_rss_ratio_to_fp32"] = paired_ratios(
                        results[(w.key, side, np_)], results[(w.model, side, np_)], "peak_rss_mb")
            rows.append(row)
    return rows


def markdown(rows, meta, nps):
    lines = [f"# ringtrain vs PyTorch {meta.get('torch_version') or '(absent)'}: training "
             f"throughput, {meta['date']}", "",
             f"Machine: {meta['cpu']}, {meta['cores']} cores; load average before "
             f"{meta['load_before']}, after {meta['load_after']}. One thread per rank "
             f"(OMP_NUM_THREADS=1). Synthetic data in memory, SGD momentum "
             f"{meta['momentum']}, {meta['repeats']} interleaved repeats: medians "
             f"[min-max]. ratio = ringtrain / PyTorch paired within each repeat; ratio of "
             "bests = best ringtrain / best PyTorch run (load only slows runs down). % peak "
             "uses median img/s.", ""]
    if meta.get("peak"):
        p = meta["peak"]
        eng = ", ".join(f"{k} {v['gflops_best']:.1f}" for k, v in p["engines"].items())
        runs = ", ".join(f"{g:.0f}" for g in meta["peak_runs_gflops"])
        lines += [f"Measured FP32 peak, 1 thread, {p['n']}^3 GEMM, best of "
                  f"{len(meta['peak_runs_gflops'])} measurements ({runs}): "
                  f"**{p['gflops_per_core_best']:.1f} GFLOP/s per core** ({eng} GFLOP/s). "
                  "% of peak = training FLOPs per image (conv/linear MACs: forward, weight "
                  "and input gradients) x images/s / (peak x ranks).", ""]
    for note in meta["notes"]:
        lines.append(f"> {note}")
    if meta["notes"]:
        lines.append("")
    for np_ in nps:
        sel = [r for r in rows if r["np"] == np_]
        title = ("Single process" if np_ == 1 else
                 f"np {np_}: ringtrain mpirun vs PyTorch DDP (gloo), global images/s, "
                 "peak RSS per rank (max over ranks)")
        lines += [f"## {title}", ""]
        head = ["model", "precision", "shape", "batch/rank", "steps", "data MB", "train MFLOP/img",
                "ringtrain img/s",
                "PyTorch img/s", "ratio", "ratio of bests", "ringtrain RSS MB", "PyTorch RSS MB", "RSS ratio",
                "ringtrain % peak", "PyTorch % peak"]
        if np_ > 1:
            head += ["ringtrain scaling eff.", "PyTorch scaling eff."]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for r in sel:
            cells = [r["model"], r["precision"], r["shape"], str(r["batch"]), str(r["steps"]),
                     f"{r['data_mb']:.0f}",
                     f"{r['train_mflop_per_image']:.2f}",
                     fmt_spread(r["ringtrain_images_per_s"]),
                     fmt_spread(r["pytorch_images_per_s"]),
                     fmt_spread(r["ratio_images_per_s"], 2),
                     fmt(r["ratio_best_images_per_s"], ".2f"),
                     fmt_spread(r["ringtrain_peak_rss_mb"]),
                     fmt_spread(r["pytorch_peak_rss_mb"]),
                     fmt_spread(r["ratio_peak_rss"], 2),
                     fmt(r["ringtrain_pct_of_peak"], ".1f"),
                     fmt(r["pytorch_pct_of_peak"], ".1f")]
            if np_ > 1:
                cells += [fmt_spread(r.get("ringtrain_scaling_efficiency"), 2),
                          fmt_spread(r.get("pytorch_scaling_efficiency"), 2)]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        mixed = [r for r in sel if r.get("ringtrain_ratio_to_fp32") or r.get("pytorch_ratio_to_fp32")]
        if mixed:
            lines += ["bf16 / fp32 of the same framework and model, paired within each repeat "
                      "(ringtrain --precision bf16; PyTorch under torch.autocast('cpu', "
                      "dtype=torch.bfloat16)):", "",
                      "| model | ringtrain img/s bf16/fp32 | PyTorch img/s bf16/fp32 | "
                      "ringtrain RSS bf16/fp32 | PyTorch RSS bf16/fp32 |", "|---|---|---|---|---|"]
            for r in mixed:
                lines.append(f"| {r['model']} | {fmt_spread(r.get('ringtrain_ratio_to_fp32'), 2)} | "
                             f"{fmt_spread(r.get('pytorch_ratio_to_fp32'), 2)} | "
                             f"{fmt_spread(r.get('ringtrain_rss_ratio_to_fp32'), 2)} | "
                             f"{fmt_spread(r.get('pytorch_rss_ratio_to_fp32'), 2)} |")
            lines.append("")
        cpu = [f"{r['model']} {fmt_spread(r['pytorch_images_per_cpu_s'])}" for r in sel
               if r["pytorch_images_per_cpu_s"]]
        if cpu:
            lines += ["PyTorch images per CPU-second of the timed steps (all ranks' threads; "
                      "near img/s when the machine was not contended): " + "; ".join(cpu)
                      + ".", ""]
        if np_ > 1:
            share = [f"{r['model']} all-reduce {fmt_spread(r['ringtrain_allreduce_share'], 2)}"
                     f" (blocked {fmt_spread(r['ringtrain_wait_share'], 2)}), CPU "
                     f"{fmt_spread(r['ringtrain_cpu_percent'])}%" for r in sel
                     if r["ringtrain_allreduce_share"]]
            if share:
                lines += ["ringtrain rank 0, share of its wall time (whole run) and mean CPU: "
                          + "; ".join(share) + ".", ""]
        base = [f"{r['model']} {fmt_spread(r['pytorch_import_rss_mb'])}" for r in sel
                if r["pytorch_import_rss_mb"]]
        if base:
            lines += ["PyTorch RSS right after `import torch` (interpreter + libraries, before "
                      "model and data), MB: " + "; ".join(base) + ".", ""]
        for r in sel:
            for side in ("ringtrain", "pytorch"):
                for e in sorted(set(r[f"{side}_errors"]))[:2]:
                    lines.append(f"- {r['model']} np {np_} {side} failed: "
                                 f"`{e.strip().splitlines()[-1] if e.strip() else e}`")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="train_throughput.sh",
        description="ringtrain vs PyTorch training throughput and memory, same run.")
    p.add_argument("--models", default=",".join(DEFAULT_MODELS),
                   help="comma list from: " + ", ".join(sorted(torch_train.NATURAL_SHAPE)))
    p.add_argument("--batch", default="",
                   help="per-rank batch overrides, e.g. mlp=64,vgg11=16 (defaults: issue table)")
    p.add_argument("--steps", type=int, default=None,
                   help="timed steps for every model (default per model: "
                        + ", ".join(f"{k} {v}" for k, v in DEFAULT_STEPS.items()) + ")")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps (default per model)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--precision", default="fp32",
                   help="comma list of fp32, bf16: bf16 runs ringtrain --precision bf16 against "
                        "PyTorch under torch.autocast('cpu', dtype=torch.bfloat16)")
    p.add_argument("--np", type=int, default=1,
                   help="with N > 1 also run ringtrain mpirun -np N vs PyTorch DDP N")
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "apps", "ringtrain"))
    p.add_argument("--out", default=None, help="write the report to FILE.md or FILE.json")
    p.add_argument("--python", default="/usr/bin/python3", help="interpreter with torch")
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch even if installed")
    p.add_argument("--no-ringtrain", action="store_true", help="skip ringtrain")
    p.add_argument("--sgemm-n", type=int, default=2048, help="GEMM size for the peak (0: skip)")
    p.add_argument("--mpirun-args", default="--bind-to none",
                   help="extra mpirun options (default leaves ranks unbound, like PyTorch's)")
    p.add_argument("--data-mb", type=float, default=32.0,
                   help="cap on the synthetic training set's pixels in memory (MB)")
    p.add_argument("--vgg-no-conv-bias", action="store_true",
                   help="baseline vgg11 without conv bias (if ringtrain's zoo has none)")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=int, default=1800, help="seconds per run")
    p.add_argument("--keep-runs", default=None, metavar="DIR",
                   help="keep ringtrain run directories under DIR")
    p.add_argument("--cluster", type=int, default=0, metavar="NODES",
                   help="across NODES emulated nodes (scripts/mpirun/cluster.sh, root, "
                        "RINGTRAIN_CLUSTER_ID): ringtrain (overlap on/off, --compress bf16 "
                        "when available) vs DDP (gloo, and its fp16_compress_hook), one rank "
                        "per node; see cluster_bench.py")
    p.add_argument("--link-rate", default="1gbit", help="--cluster: link rate (tc), e.g. 1gbit")
    p.add_argument("--mtu", type=int, default=1500, help="--cluster: link MTU")
    args = p.parse_args(argv)
    args.mpirun_args = args.mpirun_args.split()
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in args.models:
        if m not in torch_train.NATURAL_SHAPE:
            p.error(f"unknown model '{m}' (known: {', '.join(sorted(torch_train.NATURAL_SHAPE))})")
    args.precisions = [x.strip() for x in args.precision.split(",") if x.strip()]
    if not args.precisions or any(x not in ("fp32", "bf16") for x in args.precisions):
        p.error(f"--precision takes fp32 and/or bf16 (got '{args.precision}')")
    args.batch_map = dict(DEFAULT_BATCH)
    for item in filter(None, args.batch.split(",")):
        k, _, v = item.partition("=")
        args.batch_map[k.strip()] = int(v)
    if args.np < 1 or args.repeats < 1:
        p.error("--np and --repeats must be >= 1")
    if args.cluster == 1 or args.cluster < 0:
        p.error("--cluster needs at least 2 nodes")
    if args.cluster:
        import cluster_bench
        try:
            cluster_bench.rate_bps(args.link_rate)
        except ValueError as e:
            p.error(str(e))
    if args.out and not args.out.endswith((".md", ".json")):
        p.error("--out must end in .md or .json")
    return args


def main(argv=None):
    args = parse_args(argv if argv is not None else sys.argv[1:])
    notes = []
    have_torch = not args.no_torch and torch_available(args.python)
    if not have_torch:
        msg = "PyTorch not installed: ringtrain-only figures" if not args.no_torch else \
            "PyTorch skipped (--no-torch): ringtrain-only figures"
        print(msg, flush=True)
        notes.append(msg)
    have_rt = not args.no_ringtrain and os.access(args.bin, os.X_OK)
    if not have_rt:
        msg = (f"ringtrain binary not found at {args.bin} (build it with scripts/build.sh or "
               "pass --bin): PyTorch-only figures") if not args.no_ringtrain else \
            "ringtrain skipped (--no-ringtrain): PyTorch-only figures"
        print(msg, flush=True)
        notes.append(msg)
    if have_rt and args.np > 1 and not shutil.which("mpirun"):
        print("mpirun not found: ringtrain np > 1 skipped", flush=True)
        notes.append("mpirun not found: ringtrain np > 1 skipped")
    if not have_torch and not have_rt:
        print("nothing to measure", file=sys.stderr)
        return 1

    nps = [1] if args.np == 1 else [1, args.np]
    works = [Work(m, args.batch_map[m],
                  args.steps if args.steps else DEFAULT_STEPS[m],
                  args.warmup if args.warmup is not None else DEFAULT_WARMUP[m],
                  max(args.np, args.cluster), args, precision)
             for precision in args.precisions for m in args.models]
    if args.cluster:
        if not (have_rt and have_torch):
            print("--cluster needs both the ringtrain binary and PyTorch", file=sys.stderr)
            return 1
        import cluster_bench
        text = cluster_bench.main(sys.modules[__name__], args, works, notes, log)
        print(text, end="")
        if args.out:
            with open(args.out, "w") as f:
                f.write(text)
        return 0
    meta = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
            "cpu": cpu_name(), "cores": os.cpu_count(), "load_before": load(),
            "repeats": args.repeats, "momentum": args.momentum, "notes": notes,
            "ringtrain_bin": args.bin if have_rt else None, "torch_version": None}
    if have_rt:
        for w in works:
            if w.precision == args.precisions[0]:
                check_architecture(args.bin, w, notes)

    peaks = []

    run_root = args.keep_runs or tempfile.mkdtemp(prefix="ringtrain-bench-")
    os.makedirs(run_root, exist_ok=True)
    results = {(w.key, side, np_): [None] * args.repeats
               for w in works for side in ("ringtrain", "pytorch") for np_ in nps}
    plan = []
    for np_ in nps:
        if have_rt and (np_ == 1 or shutil.which("mpirun")):
            plan.append(("ringtrain", np_))
        if have_torch:
            plan.append(("pytorch", np_))
    try:
        for rep in range(args.repeats):
            order = plan if rep % 2 == 0 else list(reversed(plan))  # ABBA against drift
            if have_torch and args.sgemm_n:
                # Once per repeat; other load only slows a GEMM down, so the best is the peak.
                log(f"[{rep + 1}/{args.repeats}] sgemm {args.sgemm_n}^3, 1 thread ...")
                peaks.append(measure_peak(args))
            for w in works:
                for side, np_ in order:
                    log(f"[{rep + 1}/{args.repeats}] {w.model} {w.precision} b{w.batch} np{np_} "
                        f"{side} ...")
                    if side == "ringtrain":
                        rec = run_ringtrain(args, w, np_, run_root)
                    else:
                        rec = run_torch(args, w, np_)
                    if rec.get("ok"):
                        log(f"    {rec['images_per_s']:,.0f} images/s, peak RSS "
                            f"{rec['peak_rss_mb']:.0f} MB")
                        if side == "pytorch":
                            meta["torch_version"] = rec["versions"]["torch"]
                    else:
                        log(f"    FAILED: {rec['error']}")
                    results[(w.key, side, np_)][rep] = rec
    finally:
        if not args.keep_runs:
            shutil.rmtree(run_root, ignore_errors=True)

    peaks = [p for p in peaks if p]
    peak = max(peaks, key=lambda p: p["gflops_best"]) if peaks else None
    meta["peak"] = peak
    meta["peak_runs_gflops"] = [p["gflops_best"] for p in peaks]
    meta["load_after"] = load()
    rows = summarise(results, works, nps, peak["gflops_per_core_best"] if peak else None)
    report = markdown(rows, meta, nps)
    print(report)
    if args.out:
        with open(args.out, "w") as f:
            if args.out.endswith(".json"):
                raw = {f"{k[0]}/{k[1]}/np{k[2]}": v for k, v in results.items()}
                json.dump({"meta": meta, "rows": rows, "runs": raw}, f, indent=1)
            else:
                f.write(report)
        log(f"wrote {args.out}")
    return 0


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def load():
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
