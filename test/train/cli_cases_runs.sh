# Cases of cli_test.sh (sourced by it; the variables and helpers are its own).
# Runs that succeed: bf16 precision, the run directory and its trace, model threads, TensorBoard files, --config files, --tuning files.
# shellcheck shell=bash disable=SC2154

case_precision() {
  # bf16 compute. On a CPU without native bf16 (ONEDNN_MAX_CPU_ISA caps oneDNN's ISA as such a
  # CPU would) --precision bf16 is refused on every rank, exit 2, before anything is written.
  "${mpi[@]}" -np 2 -x ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI "$bin" train "${data[@]}" --epochs 1 --precision bf16 \
    --run-dir "$work/refused" > "$work/refused.log" 2>&1
  expect_fail "$work/refused.log" 2 "needs a CPU with native bf16 .*; this one runs [a-z0-9_]+: use --precision fp32" 2 $?
  [[ ! -e $work/refused ]] || fail "a refused run wrote $work/refused"
  if ! grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
    echo "bf16 runs skipped: this CPU has neither avx512_bf16 nor amx_bf16"
    exit 0
  fi
  # Where the CPU has it: a bf16 run learns, says bf16 in its start line, config and summary,
  # and keeps fp32 master weights: fp32 eval reads its model, an fp32 run resumes from it.
  "${mpi[@]}" -np 2 "$bin" train "${data[@]:0:${#data[@]}-1}" --progress plain --epochs 2 --precision bf16 \
    --checkpoint-every 1 --run-dir "$work/b" > "$work/b.log" 2>&1 || { cat "$work/b.log" >&2; fail "bf16 run failed"; }
  grep -q "bf16 compute, 1 thread(s) per rank" "$work/b.log" || { cat "$work/b.log" >&2; fail "start line without bf16"; }
  grep -qx 'precision = "bf16"' "$work/b/config.toml" || fail "config.toml without precision = \"bf16\""
  "$bin" eval --checkpoint "$work/b/model.rtck" > "$work/eval.log" 2>&1 || { cat "$work/eval.log" >&2; fail "eval of a bf16 run's model"; }
  cp "$work/b/summary.json" "$work/b-summary.json"
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 3 --precision fp32 --checkpoint-every 1 --run-dir "$work/b" \
    --resume auto > "$work/r.log" 2>&1 || { cat "$work/r.log" >&2; fail "fp32 resume of a bf16 run"; }
  $py - "$work/b" "$work/b-summary.json" "$work/eval.log" <<'PY' || fail "bf16 run records"
import json, pathlib, re, sys
d = pathlib.Path(sys.argv[1])
b = json.loads(open(sys.argv[2]).read())
cfg = json.loads((d / "config.json").read_text())
assert b["precision"] == "bf16" and b["steps"] == 32, b
# The synthetic set is learnable: bf16 gets far above chance (0.1) in 32 steps, as fp32 does
# in the run_dir case.
assert b["final_test_accuracy"] >= 0.9, b["final_test_accuracy"]
# eval computes in fp32 on the fp32 master weights: near the bf16 run's own last evaluation.
m = re.search(r"(\d+) test samples, loss ([0-9.]+), accuracy ([0-9.]+)", open(sys.argv[3]).read())
assert m and abs(float(m[2]) - b["final_test_loss"]) < 0.05 and abs(float(m[3]) - b["final_test_accuracy"]) < 0.03, (m and m.groups(), b)
s = json.loads((d / "summary.json").read_text())
assert s["precision"] == "fp32" and s["steps"] == 48 and s["epochs_completed"] == 3, s
assert cfg["precision"] == "fp32", cfg["precision"]
PY
}

case_run_dir() {
  # --overlap on: the communication thread's records are checked below (auto may leave it
  # off on this host; that choice is checked at the end).
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 2 --run-dir "$work/run" --checkpoint-every 1 --overlap on \
    || fail "training failed"
  for f in config.json metrics.csv rank-0.jsonl rank-1.jsonl summary.json checkpoints/ckpt-000000032.rtck; do
    [[ -s $work/run/$f ]] || fail "missing $f"
  done
  "$bin" trace "$work/run" >/dev/null || fail "trace failed"
  $py - "$work/run" <<'PY' || fail "run directory contents"
import csv, json, sys, pathlib
d = pathlib.Path(sys.argv[1])
cfg = json.loads((d / "config.json").read_text())
for k in ("model", "world_size", "hosts", "threads_per_rank", "versions", "batch_size", "global_batch_size"):
    assert k in cfg, k
assert cfg["world_size"] == 2 and len(cfg["hosts"]) == 2 and cfg["global_batch_size"] == 32
assert "mpi" in cfg["versions"] and "onednn" in cfg["versions"]
rows = list(csv.DictReader(open(d / "metrics.csv")))
assert [int(r["epoch"]) for r in rows] == [1, 2], rows
# The model learns: 32 steps on the learnable synthetic set lower the training loss from
# chance level (ln 10 = 2.30) and lift test accuracy far above chance (0.1).
first_loss = json.loads(open(d / "rank-0.jsonl").readline())["loss"]
assert float(rows[1]["train_loss"]) < 0.5 * float(rows[0]["train_loss"]) < first_loss, (first_loss, rows)
assert float(rows[1]["test_accuracy"]) >= 0.9, rows
assert all(0.0 <= float(r["test_accuracy"]) <= 1.0 for r in rows)
for r in (0, 1):
    recs = [json.loads(l) for l in open(d / f"rank-{r}.jsonl")]
    steps = [x for x in recs if x["type"] == "step"]
    assert sum(x["steps"] for x in steps) == 32, len(steps)
    for k in ("data_s", "forward_s", "backward_s", "allreduce_s", "wait_s", "optimizer_s", "checkpoint_s",
              "bytes_sent", "bytes_received"):
        assert all(k in x for x in steps), k
    assert steps[-1]["bytes_sent"] > 0
s = json.loads((d / "summary.json").read_text())
assert s["steps"] == 32 and s["epochs_completed"] == 2 and len(s["ranks"]) == 2
for rk in s["ranks"]:
    for k in ("wall_s", "phases_s", "images_per_s", "peak_rss_mb", "mean_cpu_percent", "mb_sent", "mb_received"):
        assert k in rk, k
    assert rk["peak_rss_mb"] > 0 and rk["mb_sent"] > 0
t = json.loads((d / "trace.json").read_text())
names = {e["name"] for e in t["traceEvents"]}
assert {"forward", "backward", "agreement", "all-reduce"} <= names, names
# The compute row shows the exposed wait for the all-reduce only where a step had one: with
# overlap on, a fast machine can finish every bucket before backward ends (exposed 0).
for r in (0, 1):
    exposed = sum(json.loads(l).get("exposed_comm_s", 0.0) for l in open(d / f"rank-{r}.jsonl") if '"type":"step"' in l)
    waits = sum(e["dur"] for e in t["traceEvents"] if e["name"] == "all-reduce wait" and e["pid"] == r)
    assert abs(waits / 1e6 - exposed) <= 1e-6 * (1 + len(t["traceEvents"])), (r, waits, exposed)
assert {e["pid"] for e in t["traceEvents"]} == {0, 1}
# Exposed communication: present, consistent, and the same in the step records, summary
# and trace. The communication thread ran (--overlap on at np 2).
assert cfg["overlap"] == "on" and cfg["overlap_active"] is True, cfg
for r in (0, 1):
    steps = [json.loads(l) for l in open(d / f"rank-{r}.jsonl") if '"type":"step"' in l]
    rank_sum = {"allreduce": 0.0, "exposed_comm": 0.0}
    for x in steps:
        assert 0.0 <= x["exposed_comm_s"] <= x["allreduce_s"] + 1e-9, x
        ops = x["comm_slices"]
        assert len(ops) == 1 + cfg["buckets"], ops  # the agreement, then every bucket
        assert all(a <= b <= 1e-9 for a, b in ops) and all(ops[i][0] >= ops[i - 1][1] - 1e-9 for i in range(1, len(ops)))
        # The operations' durations are what allreduce_s adds up.
        assert abs(sum(b - a for a, b in ops) - x["allreduce_s"]) <= 1e-6, (ops, x["allreduce_s"])
        rank_sum["allreduce"] += x["allreduce_s"]
        rank_sum["exposed_comm"] += x["exposed_comm_s"]
    ph = s["ranks"][r]["phases_s"]
    for k, v in rank_sum.items():
        assert abs(ph[k] - v) <= 1e-6 + 1e-9 * v, (k, ph[k], v)
    share = s["ranks"][r]["hidden_comm_share"]
    assert 0.0 <= share <= 1.0 and abs(share - (1.0 - ph["exposed_comm"] / ph["allreduce"])) <= 1e-9, share
    comm_row = [e for e in t["traceEvents"] if e["pid"] == r and e.get("tid") == 1 and e["ph"] == "X"]
    assert len(comm_row) == len(steps) * (1 + cfg["buckets"]), len(comm_row)
PY
  # The default, --overlap auto, on one host: off when the two ranks' share of the cores
  # leaves no core beside each rank's compute threads (OverlapPolicy), said on the console.
  # Not --quiet (data's last word), so that rank 0's notes reach the log.
  "${mpi[@]}" -np 2 "$bin" train "${data[@]:0:${#data[@]}-1}" --progress plain --epochs 1 --max-steps 2 \
    --run-dir "$work/auto" > "$work/auto.log" 2>&1 \
    || { cat "$work/auto.log" >&2; fail "--overlap auto run failed"; }
  $py - "$work/auto" "$work/auto.log" <<'PY' || fail "--overlap auto"
import json, os, sys, pathlib
cfg = json.loads((pathlib.Path(sys.argv[1]) / "config.json").read_text())
log = open(sys.argv[2]).read()
assert cfg["overlap"] == "auto", cfg["overlap"]
assert len(set(cfg["hosts"])) == 1, cfg["hosts"]  # mpirun without a hostfile: this host
# The rank's cores: its affinity mask (unbound here: this one), at most its half of the host.
cores = max(1, min(os.cpu_count() // 2, len(os.sched_getaffinity(0))))
spare = cores > cfg["threads_per_rank"]
assert cfg["overlap_active"] is spare, (cfg["overlap_active"], cores, cfg["threads_per_rank"])
assert ("--overlap auto: off" in log) is not spare, log
PY
}

case_model_threads() {
  # A finished run keeps its model as <run-dir>/model.rtck, which the end line names and
  # eval reads back to the run's own final figures; threads per rank come from --threads,
  # else OMP_NUM_THREADS, else the node's cores / its ranks, and show in the start line,
  # config.json and summary.json.
  "${mpi[@]}" -np 2 "$bin" train "${data[@]:0:${#data[@]}-1}" --progress plain --epochs 2 --threads 2 \
    --run-dir "$work/m" > "$work/m.log" 2>&1 || { cat "$work/m.log" >&2; fail "training failed"; }
  grep -q "2 thread(s) per rank, run dir $work/m, model -> $work/m/model.rtck" "$work/m.log" \
    || { cat "$work/m.log" >&2; fail "start line without threads or model path"; }
  grep -q "^model: $work/m/model.rtck (ringtrain eval --checkpoint $work/m/model.rtck)" "$work/m.log" \
    || { cat "$work/m.log" >&2; fail "end line does not name model.rtck"; }
  "$bin" eval --checkpoint "$work/m/model.rtck" > "$work/eval.log" 2>&1 || { cat "$work/eval.log" >&2; fail "eval of model.rtck"; }
  "${mpi[@]}" -np 2 "$bin" eval --checkpoint "$work/m/model.rtck" > "$work/eval2.log" 2>&1 \
    || { cat "$work/eval2.log" >&2; fail "eval of model.rtck under mpirun"; }
  "$bin" inspect "$work/m/model.rtck" > "$work/inspect.json" || fail "inspect of model.rtck"
  $py - "$work/m" "$work/eval.log" "$work/eval2.log" "$work/inspect.json" <<'PY' || fail "model.rtck or threads"
import json, pathlib, re, sys
d = pathlib.Path(sys.argv[1])
s = json.loads((d / "summary.json").read_text())
cfg = json.loads((d / "config.json").read_text())
head = json.loads(open(sys.argv[4]).read())
assert s["model_file"] == str(d / "model.rtck"), s["model_file"]
assert head["global_step"] == s["steps"] == 32 and head["model"] == "lenet5", (head["global_step"], s["steps"])
for log in sys.argv[2:4]:
    m = re.search(r"(\d+) test samples, loss ([0-9.]+), accuracy ([0-9.]+)", open(log).read())
    assert m and int(m[1]) == 200, open(log).read()
    # eval prints 4 decimals of the same evaluation the run ended with.
    assert abs(float(m[2]) - s["final_test_loss"]) <= 6e-5, (m[2], s["final_test_loss"])
    assert abs(float(m[3]) - s["final_test_accuracy"]) <= 6e-5, (m[3], s["final_test_accuracy"])
assert s["threads_per_rank"] == cfg["threads_per_rank"] == 2 and cfg["threads_from"] == "--threads", cfg
# config.json holds the data as loaded: the mean/std computed from the training set.
assert len(cfg["mean"]) == len(cfg["std"]) == 1 and cfg["std"][0] > 0 and cfg["data_dir"] == "", cfg
PY
  # 2 ranks x 2 threads on a host with fewer than 4 cores: one warning, from the node's first rank.
  if (( $(nproc --all) < 4 )); then
    [[ $(grep -c "warning: 2 rank(s) x 2 thread(s) on this node exceed its" "$work/m.log") -eq 1 ]] \
      || { cat "$work/m.log" >&2; fail "no single oversubscription warning"; }
  fi
  json_get() { $py -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1/config.json" "$2"; }
  # OMP_NUM_THREADS, when set, wins over the share of the cores; --threads over both.
  mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=3 -np 1 "$bin" train "${data[@]}" --max-steps 1 \
    --run-dir "$work/env" 2>/dev/null || fail "OMP_NUM_THREADS=3 run failed"
  [[ $(json_get "$work/env" threads_per_rank) == 3 && $(json_get "$work/env" threads_from) == OMP_NUM_THREADS ]] \
    || fail "OMP_NUM_THREADS=3 did not set the threads"
  env -u OMP_NUM_THREADS mpirun --oversubscribe --bind-to none -np 1 "$bin" train "${data[@]}" --max-steps 1 \
    --run-dir "$work/auto" || fail "run without OMP_NUM_THREADS failed"
  # Fashion-MNIST (when installed): config.json names the default directory it was read from.
  if [[ -d /usr/share/datasets/fashion-mnist ]]; then
    "$bin" train --model logreg --max-steps 1 --quiet --run-dir "$work/fm" || fail "Fashion-MNIST run failed"
    [[ $(json_get "$work/fm" data_dir) == /usr/share/datasets/fashion-mnist ]] || fail "config.json data_dir: $(json_get "$work/fm" data_dir)"
  fi
  want=$($py -c 'import os; print(max(1, min(os.cpu_count(), len(os.sched_getaffinity(0)))))')
  [[ $(json_get "$work/auto" threads_per_rank) == "$want" ]] || fail "default threads: $(json_get "$work/auto" threads_per_rank), expected $want"
  OMP_NUM_THREADS=two "$bin" train "${data[@]}" --max-steps 1 --run-dir "$work/bad" > "$work/bad.log" 2>&1
  code=$?
  [[ $code -eq 2 ]] && grep -q "OMP_NUM_THREADS='two'" "$work/bad.log" || { cat "$work/bad.log" >&2; fail "OMP_NUM_THREADS=two: exit $code"; }
}

case_tensorboard() {
  # Resource samples come once a second, which a short run on an idle machine never reaches:
  # train until both ranks have one and two epochs are done, whatever the machine's speed,
  # then stop the ranks with SIGTERM (a checkpoint, exit 75) mid-epoch.
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --synthetic-train 4096 --epochs 1000 --log-every 4 \
    --run-dir "$work/tb" > "$work/tb.log" 2>&1 &
  launcher=$!
  ready() {
    grep -q '"type":"resource"' "$work/tb/rank-0.jsonl" 2>/dev/null &&
      grep -q '"type":"resource"' "$work/tb/rank-1.jsonl" 2>/dev/null &&
      (($(grep -c . "$work/tb/metrics.csv" 2>/dev/null || echo 0) >= 3))
  }
  for _ in $(seq 1 600); do ready && break; sleep 0.2; done
  ready || { kill -KILL $launcher; cat "$work/tb.log" >&2; fail "no resource records and 2 epochs within 120 s"; }
  signal_ranks TERM $launcher || fail "no rank to signal"
  wait $launcher
  code=$?
  [[ $code -eq 75 ]] || { cat "$work/tb.log" >&2; fail "the signalled run exited $code, expected 75"; }
  $py "$here/../tensorboard/tensorboard_check.py" "$work/tb" 2 || fail "event files do not match the logs"
  # The check can fail: one flipped payload byte is a CRC mismatch.
  cp -r "$work/tb" "$work/tb-bad"
  ev=$(ls "$work/tb-bad/tensorboard/rank-1"/events.out.tfevents.*)
  printf '\x55' | dd of="$ev" bs=1 seek=$(($(stat -c %s "$ev") - 10)) conv=notrunc status=none
  $py "$here/../tensorboard/tensorboard_check.py" "$work/tb-bad" 2 > "$work/log" 2>&1 && fail "a corrupt event file passed"
  grep -q "bad data CRC" "$work/log" || { cat "$work/log" >&2; fail "corrupt event file: no CRC error"; }
  # A new run in the same directory replaces the old event files (as it truncates
  # metrics.csv), so the check against the new logs passes.
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 1 --run-dir "$work/tb" || fail "second run failed"
  $py "$here/../tensorboard/tensorboard_check.py" "$work/tb" 2 || fail "a rerun mixed old and new event files"
  "$bin" train "${data[@]}" --epochs 1 --no-tensorboard --run-dir "$work/notb" || fail "--no-tensorboard run failed"
  [[ -e $work/notb/metrics.csv && ! -e $work/notb/tensorboard ]] || fail "--no-tensorboard wrote tensorboard/"
}

case_config_file() {
  json_get() { $py -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1/config.json" "$2"; }
  cat > "$work/a.toml" <<'TOML'
# keys with '-' or '_'
model = "lenet5"
dataset = "synthetic"
synthetic_train = 512
synthetic-test = 200
epochs = 2
batch_size = 16
lr = 0.03
no-normalize = true
augment = true
quiet = true
TOML
  "$bin" train --config "$work/a.toml" --run-dir "$work/a" || fail "training from a config file failed"
  [[ $(json_get "$work/a" epochs) == 2 && $(json_get "$work/a" batch_size) == 16 && $(json_get "$work/a" lr) == 0.03 &&
     $(json_get "$work/a" normalize) == False && $(json_get "$work/a" augment) == True &&
     $(json_get "$work/a" synthetic_train) == 512 ]] || { cat "$work/a/config.json"; fail "config file values not applied"; }
  # Command-line flags win over the file, the file over the defaults.
  "$bin" train --config "$work/a.toml" --epochs 1 --lr 0.05 --normalize-not-a-flag 2>/dev/null &&
    fail "an unknown flag beside --config was accepted"
  "${mpi[@]}" -np 2 "$bin" train --epochs 1 --config "$work/a.toml" --lr 0.05 --run-dir "$work/b" || fail "override run failed"
  [[ $(json_get "$work/b" epochs) == 1 && $(json_get "$work/b" lr) == 0.05 && $(json_get "$work/b" batch_size) == 16 &&
     $(json_get "$work/b" normalize) == False ]] || { cat "$work/b/config.json"; fail "flags did not override the file"; }
  # config.toml reruns the run: the same config.json but for this run's own paths.
  "$bin" train --config "$work/a/config.toml" --run-dir "$work/c" || fail "rerun from config.toml failed"
  $py - "$work/a/config.json" "$work/c/config.json" <<'PY' || fail "config.toml did not round-trip to the same config.json"
import json, sys
a, c = (json.load(open(p)) for p in sys.argv[1:])
for d in (a, c):
    d.pop("checkpoint_dir")
    d.pop("snapshot_dir")  # /dev/shm/ringtrain-<run id>: the run directory's
assert a == c, {k: (a.get(k), c.get(k)) for k in set(a) | set(c) if a.get(k) != c.get(k)}
PY
  # The same keys (a value may be spelled anew: CLI11 stores --overlap on as 1).
  diff <(cut -d= -f1 "$work/a/config.toml") <(cut -d= -f1 "$work/c/config.toml") || fail "config.toml of the rerun differs"
  # A [train] section is read too.
  printf '[train]\nepochs = 1\n' | cat - <(grep -v epochs "$work/a.toml") > "$work/section.toml"
  "$bin" train --config "$work/section.toml" --run-dir "$work/s" || fail "[train] section"
  [[ $(json_get "$work/s" epochs) == 1 ]] || fail "[train] section not applied"
  # Bad files: exit 2 on every rank, one line naming the file and the key, nothing written.
  bad() {  # bad <name> <file contents> <expected pattern>
    printf '%s\n' "$2" > "$work/$1.toml"
    "${mpi[@]}" -np 2 "$bin" train --config "$work/$1.toml" --run-dir "$work/bad-$1" > "$work/log" 2>&1
    local code=$?
    [[ $code -ne 0 ]] || fail "$1: exit 0"
    # Every ringtrain line is the error (the rest is mpirun's own report).
    [[ $(grep -c "^ringtrain: usage error: config file $work/$1.toml: $3" "$work/log") -eq 2 &&
       $(grep -c "^ringtrain" "$work/log") -eq 2 ]] ||
      { cat "$work/log" >&2; fail "$1: expected one line per rank matching '$3'"; }
    [[ ! -e $work/bad-$1 ]] || fail "$1: a run directory was created"
    "$bin" train --config "$work/$1.toml" > "$work/log1" 2>&1
    code=$?
    [[ $code -eq 2 && $(wc -l < "$work/log1") -eq 1 ]] || { cat "$work/log1" >&2; fail "$1: exit $code, expected 2 and one line"; }
  }
  bad unknown 'epochs = 1
epoch = 3' "unknown key 'epoch'"
  bad type 'epochs = "three"' "key 'epochs': .*three"
  bad member 'model = "resnet999"' "key 'model': .*resnet999"
  bad section '[eval]
epochs = 1' "unknown key 'eval.epochs'"
  bad notconfig 'config = "other.toml"' "key 'config' cannot be set"
  "$bin" train --config "$work/missing.toml" > "$work/log" 2>&1
  code=$?
  [[ $code -eq 2 && $(wc -l < "$work/log") -eq 1 ]] && grep -q "config file $work/missing.toml: cannot read" "$work/log" ||
    { cat "$work/log" >&2; fail "missing config file: exit $code"; }
}

case_tuning() {
  # --tuning FILE: read on every rank; a missing file, a bad line, a file missing on one
  # rank only, or different values on two ranks give one error line on every rank and a
  # non-zero exit before training; a good file is used and named in summary.json, and
  # auto's choice with it on the start line and in summary.json.
  only_errors() {  # only_errors <log> <ranks>: each rank printed exactly one ringtrain line
    for ((r = 0; r < $2; r++)); do
      [[ $(grep -c "^ringtrain: \[rank $r\]" "$1") -eq 1 ]] || { cat "$1" >&2; fail "rank $r: not one line"; }
    done
  }
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 1 --allreduce auto --tuning "$work/absent.tuning" \
    --run-dir "$work/t0" > "$work/log" 2>&1
  expect_fail "$work/log" nonzero "absent.tuning: cannot open the tuning file \\(on rank\\(s\\) 0, 1\\)" 2 $?
  only_errors "$work/log" 2
  [[ ! -e $work/t0/rank-0.jsonl ]] || fail "training started with a missing tuning file"
  printf 'alpha_s = 5e-5\nbeta_s_per_byte = fast\n' > "$work/bad.tuning"
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 1 --tuning "$work/bad.tuning" > "$work/log" 2>&1
  expect_fail "$work/log" nonzero "bad.tuning:2: beta_s_per_byte must be a finite number" 2 $?
  only_errors "$work/log" 2
  printf '# test\nalpha_s = 2e-5\nchoice_margin = 0.1\n' > "$work/good.tuning"
  printf 'alpha_s = 3e-5\n' > "$work/other.tuning"
  # A node without the file: rank 1 names another path that does not exist.
  mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -np 1 "$bin" train "${data[@]}" --epochs 1 \
    --tuning "$work/good.tuning" : -np 1 "$bin" train "${data[@]}" --epochs 1 --tuning "$work/gone.tuning" \
    > "$work/log" 2>&1
  expect_fail "$work/log" nonzero "gone.tuning: cannot open the tuning file \\(on rank\\(s\\) 1\\)" 2 $?
  only_errors "$work/log" 2
  mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -np 1 "$bin" train "${data[@]}" --epochs 1 \
    --tuning "$work/good.tuning" : -np 1 "$bin" train "${data[@]}" --epochs 1 --tuning "$work/other.tuning" \
    > "$work/log" 2>&1
  expect_fail "$work/log" nonzero "rank\\(s\\) 1 read other parameters than rank 0" 2 $?
  only_errors "$work/log" 2
  # From a config file too: the same error.
  printf 'tuning = "%s"\n' "$work/absent.tuning" > "$work/c.toml"
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 1 --config "$work/c.toml" > "$work/log" 2>&1
  expect_fail "$work/log" nonzero "absent.tuning: cannot open the tuning file" 2 $?
  # A good file: the run uses it; the start line and summary.json name auto's choice.
  nq=()
  for a in "${data[@]}"; do [[ $a == --quiet ]] || nq+=("$a"); done
  "${mpi[@]}" -np 2 "$bin" train "${nq[@]}" --progress plain --max-steps 3 --bucket-mb 0.1 --allreduce auto \
    --tuning "$work/good.tuning" --run-dir "$work/t1" > "$work/log" 2>&1 || { cat "$work/log" >&2; fail "run with --tuning"; }
  grep -qE "all-reduce auto \[[0-9]+ x 0\.10 MiB -> (rd|ring) \(one host" "$work/log" \
    || { cat "$work/log" >&2; fail "start line lacks auto's choice"; }
  grep -q "^tuning = \"$work/good.tuning\"" "$work/t1/config.toml" || fail "config.toml lacks tuning"
  $py - "$work/t1" "$work/good.tuning" <<'PY' || fail "summary.json's all-reduce plan"
import json, sys, pathlib
d = pathlib.Path(sys.argv[1])
s = json.loads((d / "summary.json").read_text())
c = json.loads((d / "config.json").read_text())
assert s["tuning"] == sys.argv[2] and c["tuning"] == sys.argv[2], (s["tuning"], c["tuning"])
plan = s["allreduce_plan"]
assert sum(p["buckets"] for p in plan) == c["buckets"], (plan, c["buckets"])
assert len({p["bytes"] for p in plan}) == len(plan)
for p in plan:
    assert p["algo"] in ("rd", "ring") and p["basis"].startswith("one host"), p
    assert p["predicted_us"] == {}, p
PY
  # Forced: the algorithm named as forced; no tuning: "built-in".
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --max-steps 2 --allreduce rab --run-dir "$work/t2" > "$work/log" 2>&1 \
    || { cat "$work/log" >&2; fail "run with --allreduce rab"; }
  $py - "$work/t2" <<'PY' || fail "summary.json of a forced algorithm"
import json, sys, pathlib
s = json.loads((pathlib.Path(sys.argv[1]) / "summary.json").read_text())
assert s["tuning"] == "built-in", s["tuning"]
assert all(p["algo"] == "rab" and p["basis"] == "forced" for p in s["allreduce_plan"]), s["allreduce_plan"]
PY
  "$bin" train --help > "$work/help" || fail "train --help"
  grep -q -- "--tuning TEXT" "$work/help" || fail "train --help lacks --tuning"
}
