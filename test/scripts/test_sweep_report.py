#!/usr/bin/python3
"""Tests scripts/plot/sweep_report.py on a fabricated sweep directory: results.csv has the
documented columns and one row per run with the values of the fabricated runs (computed
here from fake_run's plan, not read back from the report), a failed run is a row with its
status and error and does not stop the report, report.md has the course-report tables, and
the plots are PNG files. A sweep over training modes (sync ring, sync ps, async, SSP) gets
the sync-vs-async table: steps/s per worker, time per epoch, traffic per node and the
largest staleness against its bound, computed here from the fabricated runs, and the loss
against time plot.
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import fake_run  # noqa: E402

REPORT = os.path.join(REPO, "scripts", "plot", "sweep_report.py")
EXPECTED_COLUMNS = [
    "name", "model", "dataset", "scaling", "batch_size", "per_rank_batch", "global_batch",
    "ranks", "ppn", "nodes", "allreduce", "mode", "servers", "max_staleness", "checkpoint",
    "repeat", "status", "exit_code",
    "wall_s", "launcher_wall_s", "rank_wall_s", "final_train_loss", "final_test_loss",
    "test_accuracy", "test_error", "images_per_s", "peak_rss_mb", "mean_cpu_percent",
    "mb_sent_per_rank", "mb_received_per_rank", "allreduce_share", "wait_share",
    "data_share", "steps_per_s", "worker_steps_per_s", "epoch_s", "mb_per_s_per_node", "staleness_max",
    "staleness_histogram", "checkpoint_s", "epochs_completed", "steps", "error_message",
]
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)


def close(a, b, tol=2e-3):
    return abs(float(a) - float(b)) <= tol * max(1.0, abs(float(b)))


def png_ok(path):
    try:
        with open(path, "rb") as f:
            head = f.read(8)
        return head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 10_000
    except OSError:
        return False


def sweep_record(run_dir, name, batch, np_, algo, ckpt, rep, status="ok", rc=0, ppn=None,
                 mode="sync", servers=None, max_staleness=None):
    rec = {"name": name, "model": "lenet5", "dataset": "fashion-mnist", "batch_size": batch,
           "scaling": "weak", "per_rank_batch": batch, "global_batch": batch * np_,
           "np": np_, "ppn": ppn or np_, "allreduce": algo, "checkpoint": ckpt, "repeat": rep,
           "mode": mode, "servers": servers, "max_staleness": max_staleness,
           "status": status, "exit_code": rc, "launcher_wall_s": 1.5,
           "started": "2026-01-01T00:00:00Z", "log": "launch.log", "command": "run.sh ..."}
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "sweep-run.json"), "w") as f:
        json.dump(rec, f)


def check_modes(tmp):
    """A sweep over modes on 3 nodes (1 rank each): sync ring, sync ps, async, SSP K=1."""
    sweep = os.path.join(tmp, "modes")
    plans = {}
    for slot, mode, k in (("ring", "sync", None), ("ps", "sync", None), ("async", "async", -1),
                          ("ssp1", "async", 1)):
        name = f"b64-np3-ppn1-{slot}-ckptoff-r1"
        d = os.path.join(sweep, name)
        plans[name] = fake_run.write_run(
            d, ranks=3, epochs=2, batch_size=64, allreduce=slot if mode == "sync" else "ring",
            mode=mode, servers=1, max_staleness=-1 if k is None else k,
            hosts=["node0", "node1", "node2"])
        sweep_record(d, name, 64, 3, slot if mode == "sync" else None, "off", 1, ppn=1,
                     mode=mode, servers=1 if mode == "async" else None, max_staleness=k)
    p = subprocess.run([sys.executable, REPORT, sweep], capture_output=True, text=True)
    check(p.returncode == 0, f"modes sweep: sweep_report.py exited {p.returncode}: {p.stderr}")
    with open(os.path.join(sweep, "results.csv"), newline="") as f:
        rows = {r["name"]: r for r in csv.DictReader(f)}
    labels = {"ring": "sync ring", "ps": "sync ps", "async": "async", "ssp1": "SSP K=1"}
    for name, plan in plans.items():
        r = rows.get(name, {})
        slot = name.split("-")[3]
        check(r.get("mode") == labels[slot], f"{name}: mode {r.get('mode')!r}")
        s = plan.summary()
        r0 = s["ranks"][0]
        train_s = r0["wall_s"] - r0["phases_s"]["eval"] - r0["phases_s"]["checkpoint"]
        check(close(r.get("epoch_s") or "nan", train_s / plan.epochs),
              f"{name}: time per epoch {r.get('epoch_s')} vs {train_s / plan.epochs}")
        # 3 nodes of one rank: each node's MB in and out over its wall time.
        node = [(x["mb_sent"] + x["mb_received"]) / x["wall_s"] for x in s["ranks"]]
        got = [float(v) for v in (r.get("mb_per_s_per_node") or "").split(";") if v]
        check(len(got) == 3 and all(close(a, b) for a, b in zip(got, node)),
              f"{name}: MB/s per node {got} vs {node}")
        if plan.mode == "async":
            rates = [x["steps_per_s"] for x in s["ranks"] if x.get("role") == "worker"]
            check(close(r.get("steps_per_s") or "nan", sum(rates) / len(rates)),
                  f"{name}: steps/s per worker {r.get('steps_per_s')} vs {rates}")
            check(r.get("allreduce") == "" and r.get("servers") == "1",
                  f"{name}: an async run has servers, no all-reduce: {r.get('allreduce')!r}")
            seen = max(int(k) for k in s["staleness_histogram"])
            check(r.get("staleness_max") == str(seen),
                  f"{name}: largest staleness {r.get('staleness_max')} vs {seen}")
            if plan.max_staleness >= 0:
                check(seen <= plan.max_staleness, f"{name}: the fake broke its own bound")
        else:
            check(close(r.get("steps_per_s") or "nan", s["steps"] / train_s),
                  f"{name}: sync steps/s {r.get('steps_per_s')} vs {s['steps'] / train_s}")
            check(r.get("staleness_max") == "", f"{name}: a sync run has no staleness")
    with open(os.path.join(sweep, "report.md")) as fh:
        md = fh.read()
    check("## Modes: synchronous vs asynchronous" in md, "report.md lacks the modes table")
    # Rows from the most to the least synchronous, and one Mode column instead of the
    # all-reduce (which 'sync ps' names already).
    at = {label: md.find(f"\n| {label} |") for label in ("sync ring", "sync ps", "SSP K=1", "async")}
    check(all(i >= 0 for i in at.values()) and
          max(at["sync ring"], at["sync ps"]) < at["SSP K=1"] < at["async"], f"mode rows: {at}")
    check("| All-reduce |" not in md, "the mode column replaces the all-reduce column")
    check("| 1 (1) |" in md, "SSP K=1's staleness: largest seen 1, bound 1")
    check(png_ok(os.path.join(sweep, "plots", "loss_vs_time.png")), "loss_vs_time.png")
    check("(plots/loss_vs_time.png)" in md, "report.md lacks the loss against time plot")


def main():
    tmp = tempfile.mkdtemp(prefix="sweep-report-")
    sweep = os.path.join(tmp, "sweep")
    plans = {}
    # The grid: batch 32, 64 x ranks 1, 2, ring, two repeats of one combination.
    for batch in (32, 64):
        for np_ in (1, 2):
            for rep in (1, 2) if (batch, np_) == (64, 2) else (1,):
                name = f"b{batch}-np{np_}-ppn{np_}-ring-ckptoff-r{rep}"
                d = os.path.join(sweep, name)
                plans[name] = fake_run.write_run(d, ranks=np_, epochs=3, batch_size=batch,
                                                 seed=rep)
                sweep_record(d, name, batch, np_, "ring", "off", rep)
                with open(os.path.join(d, "launch.log"), "w") as f:
                    f.write("training...\n")
    # A failed run: half an epoch of rank logs, no config/metrics/summary, an error in the log.
    failed = "b128-np2-ppn2-ring-ckptoff-r1"
    d = os.path.join(sweep, failed)
    plan = fake_run.Plan(ranks=2, epochs=3, batch_size=128)
    for r in range(2):
        plan.rank_records[r] = plan.rank_records[r][:20]
        fake_run.write_rank(plan, d, r)
    sweep_record(d, failed, 128, 2, "ring", "off", 1, status="failed", rc=1)
    with open(os.path.join(d, "launch.log"), "w") as f:
        f.write("ringtrain: [rank 1] error: std::bad_alloc while building conv1\n"
                "-------\nprimary job terminated normally, but 1 process returned\n")
    # A run with only the mandatory files (no summary.json, no resource samples) and no
    # sweep-run.json: parameters come from config.json.
    minimal = "by-hand-minimal"
    fake_run.write_run(os.path.join(sweep, minimal), minimal=True, ranks=2, epochs=2,
                       batch_size=16)
    # Things that are not runs are ignored.
    os.makedirs(os.path.join(sweep, ".attempts", "old"), exist_ok=True)
    os.makedirs(os.path.join(sweep, "notes"), exist_ok=True)

    p = subprocess.run([sys.executable, REPORT, sweep], capture_output=True, text=True)
    check(p.returncode == 0, f"sweep_report.py exited {p.returncode}: {p.stderr}")

    with open(os.path.join(sweep, "results.csv"), newline="") as f:
        reader = csv.DictReader(f)
        check(reader.fieldnames == EXPECTED_COLUMNS, f"columns: {reader.fieldnames}")
        rows = {r["name"]: r for r in reader}
    expected_names = set(plans) | {failed, minimal}
    check(set(rows) == expected_names, f"rows {sorted(rows)} != {sorted(expected_names)}")

    for name, plan in plans.items():
        r = rows.get(name)
        if r is None:
            continue
        s = plan.summary()
        check(r["status"] == "ok", f"{name}: status {r['status']}")
        check(int(r["ranks"]) == plan.ranks and int(r["batch_size"]) == plan.batch,
              f"{name}: params {r['ranks']} {r['batch_size']}")
        check(int(r["global_batch"]) == plan.batch * plan.ranks, f"{name}: global batch")
        check(close(r["test_accuracy"], plan.metrics[-1]["test_accuracy"]),
              f"{name}: accuracy {r['test_accuracy']}")
        check(close(r["test_error"], 1 - plan.metrics[-1]["test_accuracy"]),
              f"{name}: error {r['test_error']}")
        check(close(r["final_train_loss"], plan.metrics[-1]["train_loss"]),
              f"{name}: loss {r['final_train_loss']}")
        walls = [plan.rank_totals[k]["wall_s"] for k in range(plan.ranks)]
        check(close(r["wall_s"], max(walls)), f"{name}: wall {r['wall_s']} vs {max(walls)}")
        got_walls = [float(x) for x in r["rank_wall_s"].split(";")]
        check(len(got_walls) == plan.ranks and all(close(a, b) for a, b in
                                                   zip(got_walls, walls)),
              f"{name}: rank walls {r['rank_wall_s']} vs {walls}")
        peak = max(plan.rank_totals[k]["peak"] for k in range(plan.ranks))
        check(close(r["peak_rss_mb"], peak), f"{name}: peak {r['peak_rss_mb']} vs {peak}")
        sent = [plan.rank_totals[k]["sent"] / 1e6 for k in range(plan.ranks)]
        got_sent = [float(x) for x in r["mb_sent_per_rank"].split(";")]
        check(all(close(a, b) for a, b in zip(got_sent, sent)) and len(got_sent) == len(sent),
              f"{name}: MB sent {r['mb_sent_per_rank']} vs {sent}")
        ar = sum(plan.rank_totals[k]["phases_s"]["allreduce"] / plan.rank_totals[k]["wall_s"]
                 for k in range(plan.ranks)) / plan.ranks
        wt = sum(plan.rank_totals[k]["phases_s"]["wait"] / plan.rank_totals[k]["wall_s"]
                 for k in range(plan.ranks)) / plan.ranks
        check(close(r["allreduce_share"], ar, 1e-2),
              f"{name}: allreduce share {r['allreduce_share']} vs {ar}")
        check(close(r["wait_share"], wt, 1e-2), f"{name}: wait share {r['wait_share']} vs {wt}")
        ds = sum(plan.rank_totals[k]["phases_s"]["data"] / plan.rank_totals[k]["wall_s"]
                 for k in range(plan.ranks)) / plan.ranks
        check(close(r["data_share"], ds, 1e-2), f"{name}: data share {r['data_share']} vs {ds}")
        check(close(r["images_per_s"], s["images_per_s"]), f"{name}: images/s")
        check(r["error_message"] == "", f"{name}: error message on a good run")
        if plan.ranks == 1:
            check(float(r["allreduce_share"]) == 0.0, f"{name}: 1 rank has no all-reduce")

    f = rows.get(failed, {})
    check(f.get("status") == "failed" and f.get("exit_code") == "1",
          f"failed run: {f.get('status')} {f.get('exit_code')}")
    check("std::bad_alloc" in f.get("error_message", ""),
          f"failed run's error message: {f.get('error_message')!r}")
    check(f.get("test_accuracy") == "", "a run that never evaluated has no accuracy")
    check(f.get("model") == "lenet5", "failed run keeps its parameters from sweep-run.json")

    m = rows.get(minimal, {})
    check(m.get("status") == "incomplete", f"minimal run status {m.get('status')}")
    check(m.get("ranks") == "2" and m.get("batch_size") == "16", "minimal run params")
    check(m.get("peak_rss_mb") == "" and m.get("wait_share") == "",
          "absent fields must stay empty, not zero")
    check(m.get("test_accuracy") != "", "minimal run's accuracy from metrics.csv")

    with open(os.path.join(sweep, "report.md")) as fh:
        md = fh.read()
    for needle in ["| Ranks |", "Time on each rank (s)", "| Accuracy (%) | Error (%) |",
                   "| Batch size |",
                   "| Time (s) | Loss | Accuracy (%) | Peak memory (MB) | CPU (%) |",
                   "MB sent per rank", "MB received per rank", "All-reduce (% of time)",
                   "of which waiting (%)", "Waiting for data (%)", failed, "std::bad_alloc",
                   "(plots/vs_batch_size.png)", "(plots/vs_ranks.png)",
                   "(plots/convergence.png)"]:
        check(needle in md, f"report.md lacks {needle!r}")
    # Repeats are averaged: the (64, 2) row shows a mean ± sd.
    check("±" in md, "report.md should show the spread of the repeated combination")
    for png in ("vs_batch_size.png", "vs_ranks.png", "convergence.png"):
        check(png_ok(os.path.join(sweep, "plots", png)), f"{png} is not a valid PNG")

    check("## Modes" not in md, "a sweep of sync runs alone has no modes table")
    check_modes(tmp)

    # An empty directory is an error, not an empty report.
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    p = subprocess.run([sys.executable, REPORT, empty], capture_output=True, text=True)
    check(p.returncode == 1 and "no runs" in p.stderr, f"empty sweep: {p.returncode} {p.stderr}")

    # One home for each helper: the report scripts live in scripts/plot beside the modules
    # they import (no sys.path edits, so they also run from another directory), and the
    # Markdown helpers are defined once.
    p = subprocess.run([sys.executable, REPORT, "--no-plots", sweep], capture_output=True, text=True,
                       cwd=tempfile.gettempdir())
    check(p.returncode == 0, f"sweep_report.py from another directory: {p.returncode} {p.stderr}")
    scripts = [os.path.join(root, f) for root, _, files in os.walk(os.path.join(REPO, "scripts"))
               for f in files if f.endswith(".py")]
    for helper in ("def table(", "def pct("):
        homes = [os.path.relpath(f, REPO) for f in scripts if helper in open(f).read()]
        check(homes == ["scripts/plot/rundata.py"], f"{helper}...) defined in {homes}")
    edits = [os.path.relpath(f, REPO) for f in scripts
             if "plot" in f and "sys.path" in open(f).read()]
    check(not edits, f"sys.path edits in {edits}")

    if failures:
        for msg in failures:
            print("FAIL:", msg)
        print(f"test_sweep_report: {len(failures)} failure(s); files in {tmp}")
        return 1
    subprocess.run(["rm", "-rf", tmp])
    print("test_sweep_report: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
