#!/usr/bin/python3
"""Tests scripts/plot/plot_run.py and run_report.py on fabricated run directories: a full
run gives the five PNGs (valid signature, non-trivial size) and a report.md whose numbers
match the fabricated run; a run with only the mandatory files (no summary.json, no resource
samples) still gives loss/accuracy/phase plots and a report flagged incomplete; a directory
with nothing in it is an error; a rank log cut off mid-line is read with a warning; the
benchmarks' windowed throughput; no script but rundata.py/sweepdata.py reads a run's files.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import fake_run  # noqa: E402

PLOT = os.path.join(REPO, "scripts", "plot", "plot_run.py")
REPORT = os.path.join(REPO, "scripts", "plot", "run_report.py")
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)


def png_ok(path):
    try:
        with open(path, "rb") as f:
            head = f.read(8)
        return head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 10_000
    except OSError:
        return False


def check_windowed_throughput(tmp, rundata):
    """The benchmarks' images/s after warm-up: steps of world x batch images between the
    warm-up's last step and the last one, less the evaluation inside that window."""
    d = os.path.join(tmp, "window")
    os.makedirs(d)
    recs = [{"type": "step", "t": 1.0 + 0.5 * i, "step": i + 1, "data_s": 0.1, "forward_s": 0.1,
             "backward_s": 0.2, "optimizer_s": 0.05, "allreduce_s": 0.05, "steps": 1}
            for i in range(10)]
    recs.append({"type": "eval", "t": 3.2, "seconds": 0.5})
    with open(os.path.join(d, "rank-0.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in recs))
    run = rundata.Run(d)
    w = run.throughput_after_warmup(2, 8, 2)
    # steps 2..10: 8 steps of 2 x 8 images over 4.0 s less 0.5 s of evaluation.
    check(w and w["timed_steps"] == 8 and abs(w["images_per_s"] - 8 * 16 / 3.5) < 1e-9,
          f"throughput_after_warmup: {w}")
    check(run.throughput_after_warmup(10, 8, 2) is None, "too few steps after warm-up: None")
    m = run.step_ms_medians(0, skip=2)
    check(abs(m["compute_ms"] - 450.0) < 1e-6 and abs(m["exposed_ms"] - 50.0) < 1e-6,
          f"step_ms_medians: {m}")
    # --log-every 10 over 23 steps: records end steps 10, 20 and 23. A warm-up of 3 steps
    # opens the window at the first record past it (step 10), not at the third record.
    d = os.path.join(tmp, "window10")
    os.makedirs(d)
    recs = [{"type": "step", "t": 0.5 + 0.25 * s, "step": s, "steps": n}
            for s, n in ((10, 10), (20, 10), (23, 3))]
    with open(os.path.join(d, "rank-0.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in recs))
    w = rundata.Run(d).throughput_after_warmup(3, 32, 1)
    # steps 10..23: 13 steps of 32 images over 3.25 s; 250 ms per step.
    check(w and w["timed_steps"] == 13 and abs(w["images_per_s"] - 13 * 32 / 3.25) < 1e-9
          and abs(w["step_ms_median"] - 250.0) < 1e-9,
          f"throughput_after_warmup, 10-step records: {w}")
    check(rundata.Run(d).throughput_after_warmup(21, 32, 1) is None, "no record after the window's start: None")


def check_one_reader():
    """One reader of run and sweep directories: no script but rundata.py and sweepdata.py
    opens a run's or a sweep's files for reading."""
    names = r"(summary\.json|metrics\.csv|rank-|sweep(-run)?\.json|results\.csv)"
    reading = re.compile(r"(open\(|json\.load|DictReader|read_json)[^\n]*" + names)
    homes = {"rundata.py", "sweepdata.py"}
    for root, _, files in os.walk(os.path.join(REPO, "scripts")):
        for f in files:
            if f in homes or not f.endswith((".py", ".sh")):
                continue
            path = os.path.join(root, f)
            for i, line in enumerate(open(path), 1):
                if reading.search(line) and '"w"' not in line:
                    failures.append(f"{os.path.relpath(path, REPO)}:{i} reads a run file "
                                    f"itself: {line.strip()}")


def main():
    tmp = tempfile.mkdtemp(prefix="plot-run-")
    full = os.path.join(tmp, "full")
    plan = fake_run.write_run(full, ranks=2, epochs=3, batch_size=64, checkpoint=True)
    p = subprocess.run([sys.executable, PLOT, full, "--out", os.path.join(tmp, "out")],
                       capture_output=True, text=True)
    check(p.returncode == 0, f"plot_run.py exited {p.returncode}: {p.stderr}")
    names = ["loss.png", "accuracy.png", "resources.png", "network.png", "phases.png"]
    printed = [os.path.basename(x) for x in p.stdout.split()]
    check(sorted(printed) == sorted(names), f"plot_run.py printed {printed}")
    for n in names:
        check(png_ok(os.path.join(tmp, "out", n)), f"{n} is not a valid PNG")

    p = subprocess.run([sys.executable, REPORT, full], capture_output=True, text=True)
    check(p.returncode == 0, f"run_report.py exited {p.returncode}: {p.stderr}")
    with open(os.path.join(full, "report.md")) as f:
        md = f.read()
    s = plan.summary()
    acc = 100 * plan.metrics[-1]["test_accuracy"]
    for needle in [f"| Final test accuracy (%) | {acc:.2f} |",
                   f"| Test error (%) | {100 - acc:.2f} |",
                   f"| Wall time (s) | {s['wall_s']:.2f} |",
                   "| Rank | Host | Wall (s) | Data | Forward | Backward | All-reduce | Waiting |",
                   "3 checkpoint(s)", "![Loss per epoch](plots/loss.png)",
                   "![Time per phase per rank](plots/phases.png)"]:
        check(needle in md, f"report.md lacks {needle!r}")
    check("Incomplete run" not in md, "a complete run is not incomplete")
    check("## Membership" not in md, "no membership section without membership.jsonl")
    # run.sh --elastic's membership.jsonl: one row per restart.
    with open(os.path.join(full, "membership.jsonl"), "w") as f:
        f.write(json.dumps({"type": "start", "hosts": ["n0", "n1", "n2"], "np": 3, "min_np": 2, "max_np": 3}) + "\n")
        f.write(json.dumps({"type": "restart", "restart": 1, "detected_utc": "2026-11-25T20:00:00+00:00",
                            "exit_status": 205, "hosts_out": ["n1"], "hosts_in": [], "np_before": 3,
                            "np_after": 2, "resumed_from_step": 40, "steps_replayed": 3,
                            "seconds_lost": 6.5}) + "\n")
    p = subprocess.run([sys.executable, REPORT, full, "--no-plots"], capture_output=True, text=True)
    with open(os.path.join(full, "report.md")) as f:
        md = f.read()
    check("| 1 | 2026-11-25T20:00:00+00:00 | 205 | n1 | - | 3 -> 2 | 40 | 3 | 6.50 |" in md,
          f"report.md lacks the restart row: {md[md.find('## Membership'):][:600]!r}")
    check("at np 3 (--min-np 2, --max-np 3); 1 restart(s)" in md, "report.md lacks the membership line")
    os.remove(os.path.join(full, "membership.jsonl"))
    # Each rank's phase row: all-reduce excludes the wait, shares of the rank's wall time.
    for r in s["ranks"]:
        ph = r["phases_s"]
        net = ph["allreduce"] - ph["wait"]
        cell = f"{net:.2f} ({100 * net / r['wall_s']:.0f}%)"
        check(cell in md, f"rank {r['rank']}: all-reduce excl. wait cell {cell!r} missing")
    for n in names:
        check(png_ok(os.path.join(full, "plots", n)), f"report's {n} missing")

    minimal = os.path.join(tmp, "minimal")
    fake_run.write_run(minimal, minimal=True, ranks=2, epochs=2, batch_size=32)
    p = subprocess.run([sys.executable, REPORT, minimal], capture_output=True, text=True)
    check(p.returncode == 0, f"run_report.py on a minimal run exited {p.returncode}: {p.stderr}")
    made = sorted(os.listdir(os.path.join(minimal, "plots")))
    check(made == ["accuracy.png", "loss.png", "phases.png"],
          f"minimal run plots {made} (no resources/network without samples)")
    with open(os.path.join(minimal, "report.md")) as f:
        md = f.read()
    check("Incomplete run" in md, "a run without summary.json is flagged incomplete")
    check("![CPU and memory per rank]" not in md, "no resource plot without samples")

    # A rank killed mid-write: its log ends in a torn line. The report still comes out,
    # the step records before the tear count, and stderr says which line was dropped.
    with open(os.path.join(minimal, "rank-1.jsonl"), "a") as f:
        f.write('{"type":"step","t":9.5,"epoch":2,"ste')
    p = subprocess.run([sys.executable, REPORT, minimal], capture_output=True, text=True)
    check(p.returncode == 0, f"run_report.py on a torn log exited {p.returncode}: {p.stderr}")
    check("rank-1.jsonl:" in p.stderr and "truncated last line" in p.stderr,
          f"no warning naming the torn line: {p.stderr!r}")
    sys.path.insert(0, os.path.join(REPO, "scripts", "plot"))
    import rundata  # noqa: E402
    warned = []
    recs = rundata.read_jsonl(os.path.join(minimal, "rank-1.jsonl"), warned.append)
    check(len(warned) == 1 and recs and recs[-1].get("type") is not None,
          f"read_jsonl: {len(recs)} records, warnings {warned}")
    clean = rundata.read_jsonl(os.path.join(minimal, "rank-0.jsonl"), warned.append)
    check(len(warned) == 1 and len(clean) > 0, "a clean log gives no warning")

    check_windowed_throughput(tmp, rundata)
    check_one_reader()

    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    p = subprocess.run([sys.executable, PLOT, empty], capture_output=True, text=True)
    check(p.returncode == 1 and "nothing to plot" in p.stderr,
          f"empty dir: {p.returncode} {p.stderr}")
    p = subprocess.run([sys.executable, REPORT, os.path.join(tmp, "absent")],
                       capture_output=True, text=True)
    check(p.returncode == 2, f"missing dir: exit {p.returncode}")

    if failures:
        for msg in failures:
            print("FAIL:", msg)
        print(f"test_plot_run: {len(failures)} failure(s); files in {tmp}")
        return 1
    subprocess.run(["rm", "-rf", tmp])
    print("test_plot_run: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
