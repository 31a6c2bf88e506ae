#!/usr/bin/env bash
# End-to-end checks of `ringtrain` under mpirun: run directory contents, the merged trace,
# SIGTERM + resume bit-identical to an uninterrupted run, a SIGKILLed rank never hangs the
# job, and every bad input (config mismatch, corrupt or foreign checkpoint, damaged
# checkpoint metadata, a directory as checkpoint, sizes beyond memory, NaN loss, usage
# errors, a full disk under a log) gives its one-line error on every rank and a non-zero
# exit; a log cut off mid-line is read with a warning; a stopped rank ends the job through
# the stall watchdog; TensorBoard event files decode and match the logs; --config files
# apply, lose to flags, round-trip, and fail in one line naming the file and the key;
# --precision bf16 is refused without native bf16 and otherwise trains and resumes in fp32;
# --tuning files are read on every rank and auto's choice is named on the start line and
# in summary.json.
# Usage: cli_test.sh <ringtrain binary> <case>
set -uo pipefail

bin=$1
case_name=$2
py=/usr/bin/python3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d /tmp/ringtrain_cli_test.XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
mpi=(mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
# --log-every 1: the cases count step records to know how far a run has got.
data=(--dataset synthetic --synthetic-shape 1x28x28 --synthetic-train 512 --synthetic-test 200 --model lenet5
      --batch-size 16 --lr 0.02 --log-every 1 --quiet)

fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source=../support/mpi_ranks.sh
source "$here/../support/mpi_ranks.sh"
expect_fail() {  # expect_fail <log> <expected exit: nonzero|2> <pattern> <ranks>
  local log=$1 want=$2 pattern=$3 ranks=$4 code=$5
  if [[ $want == 2 && $code -ne 2 ]]; then cat "$log" >&2; fail "expected exit 2, got $code"; fi
  if [[ $code -eq 0 ]]; then cat "$log" >&2; fail "expected a non-zero exit"; fi
  for ((r = 0; r < ranks; r++)); do
    grep -qE "ringtrain: \[rank $r\] error: .*$pattern" "$log" || { cat "$log" >&2; fail "rank $r did not report '$pattern'"; }
  done
}
step_records() { local n; n=$(grep -c '"type":"step"' "$1" 2>/dev/null); echo "${n:-0}"; }
one_line_error() {  # one_line_error <log> <exit> <expected exit> <pattern>: a local command's only output
  local log=$1 code=$2 want=$3 pattern=$4
  [[ $code -eq $want ]] || { cat "$log" >&2; fail "expected exit $want, got $code ($pattern)"; }
  grep -qE "^ringtrain: error: .*$pattern" "$log" || { cat "$log" >&2; fail "no error matching '$pattern'"; }
  [[ $(wc -l < "$log") -eq 1 ]] || { cat "$log" >&2; fail "more than one line of output for '$pattern'"; }
}
params_crc() { "$bin" inspect "$1" | $py -c 'import json,sys; print(json.load(sys.stdin)["sections"]["params_crc32"])'; }

case $case_name in
precision)
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
  ;;
run_dir)
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
  ;;
model_threads)
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
  ;;
resume_sigterm)
  # Uninterrupted reference: 3 epochs, checkpoint at the end.
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --synthetic-train 4096 --epochs 3 --checkpoint-every 3 \
    --run-dir "$work/ref" || fail "reference run failed"
  ref=$(ls "$work/ref/checkpoints"/ckpt-*.rtck | tail -1)
  # Interrupted: SIGTERM to the ranks mid-run, then resume until the end.
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --synthetic-train 4096 --epochs 3 --checkpoint-every 3 \
    --run-dir "$work/cut" > "$work/cut.log" 2>&1 &
  launcher=$!
  # Signal once training is under way (the handlers are installed when it starts).
  steps=0
  for _ in $(seq 1 300); do
    sleep 0.2
    steps=$(cat "$work/cut/rank-0.jsonl" 2>/dev/null | grep -c '"type":"step"')
    (( steps >= 40 )) && break
  done
  (( steps >= 40 )) || { cat "$work/cut.log" >&2; fail "training did not get under way within 60 s"; }
  # The ranks only, not mpirun.
  signal_ranks TERM $launcher || fail "no rank to signal"
  wait $launcher
  code=$?
  # 75: stopped with a checkpoint, "resume me" (not 0, "done").
  [[ $code -eq 75 ]] || { cat "$work/cut.log" >&2; fail "the signalled run exited $code, expected 75"; }
  [[ ! -e $work/cut/model.rtck ]] || fail "a run stopped by a signal wrote model.rtck"
  cut_ckpt=$(ls "$work/cut/checkpoints"/ckpt-*.rtck | tail -1)
  [[ -n $cut_ckpt ]] || fail "no checkpoint written on SIGTERM"
  [[ $cut_ckpt != "$work/cut/checkpoints/$(basename "$ref")" ]] || fail "the run finished before the signal"
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --synthetic-train 4096 --epochs 3 --checkpoint-every 3 \
    --run-dir "$work/cut" --resume auto || fail "resume failed"
  final=$(ls "$work/cut/checkpoints"/ckpt-*.rtck | tail -1)
  [[ $(basename "$final") == $(basename "$ref") ]] || fail "resumed run ended at $final, reference at $ref"
  [[ $(params_crc "$final") == $(params_crc "$ref") ]] || fail "resumed parameters differ from the uninterrupted run"
  # The resumed run added event files beside the first run's; together they match the
  # appended logs.
  [[ $(ls "$work/cut/tensorboard/epoch" | wc -l) -eq 2 ]] || fail "resume did not add a second event file"
  $py "$here/../tensorboard/tensorboard_check.py" "$work/cut" 2 || fail "event files of the resumed run do not match its logs"
  ;;
signal_storm)
  # SIGTERM every 150 us at a training process whose Linear layers run oneDNN 2.6.3's jit
  # GEMM (it moves the stack pointer into the heap): with a signal handler on a compute
  # thread this aborted 4 runs of 4 with heap corruption; taken by the signal thread
  # (StopSignals.h), every run must stop cleanly with a checkpoint that loads.
  for ((i = 1; i <= ${RINGTRAIN_STORM_RUNS:-5}; i++)); do
    "$bin" train --model mlp --dataset synthetic --synthetic-shape 3x32x32 --synthetic-train 4096 \
      --synthetic-test 64 --batch-size 128 --epochs 100 --quiet --run-dir "$work/s$i" > "$work/s$i.log" 2>&1 &
    pid=$!
    # The first step record: the loop polls the stop flag from then on.
    for _ in $(seq 1 600); do
      grep -q '"type":"step"' "$work/s$i/rank-0.jsonl" 2>/dev/null && break
      sleep 0.05
    done
    grep -q '"type":"step"' "$work/s$i/rank-0.jsonl" || { kill -KILL $pid; cat "$work/s$i.log" >&2; fail "run $i: no step within 30 s"; }
    $py - "$pid" <<'PY'
import os, signal, sys, time
pid, deadline = int(sys.argv[1]), time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        break
    time.sleep(150e-6)
PY
    wait $pid
    code=$?
    [[ $code -eq 75 ]] || { cat "$work/s$i.log" >&2; fail "run $i under a SIGTERM storm exited $code, expected 75"; }
    ck=$(ls "$work/s$i/checkpoints"/ckpt-*.rtck 2>/dev/null | tail -1)
    [[ -n $ck ]] || fail "run $i: no checkpoint after the stop"
    "$bin" inspect "$ck" > /dev/null || fail "run $i: checkpoint $ck does not load"
    grep -q '"stopped_by": *"signal"' "$work/s$i/summary.json" || fail "run $i: summary does not say stopped by signal"
  done
  ;;
sigterm_mpirun_slow)
  # SIGTERM to the launcher (kill, Slurm preemption) while steps take longer than Open MPI's
  # 1 s odls_base_sigkill_timeout: run.sh passes it to mpirun as SIGUSR2, which mpirun
  # forwards at once, and the ranks stop inside their step, checkpoint the last completed
  # step and exit 75. (SIGTERM to a bare mpirun reaches the ranks only after that timeout,
  # SIGKILL follows as long after, and mpirun exits 1 whatever the ranks do.)
  run_sh=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../scripts/mpirun" && pwd)/run.sh
  "$run_sh" --bin "$bin" -np 2 --threads 1 --no-bind -- train --model vgg11 --dataset synthetic \
    --synthetic-shape 3x32x32 --synthetic-train 4096 --synthetic-test 64 --batch-size 64 --epochs 1 --quiet \
    --run-dir "$work/slow" > "$work/slow.log" 2>&1 &
  launcher=$!
  for _ in $(seq 1 600); do
    (( $(step_records "$work/slow/rank-0.jsonl") >= 1 )) && break
    sleep 0.2
  done
  (( $(step_records "$work/slow/rank-0.jsonl") >= 1 )) \
    || { kill -KILL $launcher; cat "$work/slow.log" >&2; fail "no step within 120 s"; }
  kill -TERM $launcher
  wait $launcher
  code=$?
  [[ $code -eq 75 ]] || { cat "$work/slow.log" >&2; fail "SIGTERM to mpirun: exit $code, expected 75"; }
  ck=$(ls "$work/slow/checkpoints"/ckpt-*.rtck 2>/dev/null | tail -1)
  [[ -n $ck ]] || { cat "$work/slow.log" >&2; fail "no checkpoint after SIGTERM to mpirun"; }
  $py - "$work/slow" "$("$bin" inspect "$ck")" <<'PY' || fail "checkpoint or summary after SIGTERM to mpirun"
import json, pathlib, sys
d, header = pathlib.Path(sys.argv[1]), json.loads(sys.argv[2])
steps = [json.loads(l) for l in open(d / "rank-0.jsonl") if '"type":"step"' in l]
# The premise: these steps are longer than Open MPI's default 1 s grace period.
longest = max(x["forward_s"] + x["backward_s"] + x["allreduce_s"] for x in steps)
assert longest > 1.0, f"steps of {longest:.2f}s do not test a stop slower than 1 s"
s = json.loads((d / "summary.json").read_text())
assert s["stopped_by"] == "signal", s["stopped_by"]
# The checkpoint holds the last completed step, the one the summary reports.
assert header["global_step"] == s["steps"] == sum(x["steps"] for x in steps), (header["global_step"], s["steps"])
PY
  ;;
sigkill)
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --synthetic-train 8192 --epochs 50 --checkpoint-every-steps 20 \
    --run-dir "$work/k" > "$work/k.log" 2>&1 &
  launcher=$!
  for _ in $(seq 1 150); do
    sleep 0.2
    ls "$work/k/checkpoints"/ckpt-*.rtck >/dev/null 2>&1 && break
  done
  pid=$(rank_pid $launcher 1) || fail "no rank to kill"
  kill -KILL "$pid"
  start=$(date +%s)
  while kill -0 $launcher 2>/dev/null; do
    sleep 0.5
    (( $(date +%s) - start > 30 )) && { kill_job $launcher; fail "mpirun still running 30 s after SIGKILL"; }
  done
  wait $launcher && fail "mpirun exited 0 after a rank was killed"
  last=$(ls "$work/k/checkpoints"/ckpt-*.rtck | tail -1)
  "$bin" inspect "$last" > /dev/null || fail "the last checkpoint does not load"
  "${mpi[@]}" -np 1 "$bin" eval --checkpoint "$last" > "$work/eval.log" 2>&1 || fail "eval of the last checkpoint failed"
  grep -q "accuracy" "$work/eval.log" || fail "eval printed no accuracy"
  ;;
config_mismatch)
  mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -np 1 "$bin" train "${data[@]}" --epochs 1 --lr 0.1 \
    --run-dir "$work/m" : -np 1 "$bin" train "${data[@]}" --epochs 1 --lr 0.2 --run-dir "$work/m" > "$work/log" 2>&1
  expect_fail "$work/log" nonzero "rank\\(s\\) 1 disagree with rank 0" 2 $?
  ;;
corrupt_checkpoint)
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 1 --checkpoint-every 1 --run-dir "$work/c" || fail "training failed"
  ck=$(ls "$work/c/checkpoints"/ckpt-*.rtck | tail -1)
  cp "$ck" "$work/flipped.rtck"
  size=$(stat -c %s "$ck")
  printf '\xff' | dd of="$work/flipped.rtck" bs=1 seek=$((size - 100)) conv=notrunc status=none
  cp "$work/flipped.rtck" "$work/flipped.orig"
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 2 --resume "$work/flipped.rtck" --run-dir "$work/c2" > "$work/log" 2>&1
  expect_fail "$work/log" nonzero "flipped.rtck: optimizer: CRC32 mismatch" 2 $?
  cmp -s "$work/flipped.rtck" "$work/flipped.orig" || fail "the corrupt checkpoint was modified"
  head -c $((size / 2)) "$ck" > "$work/truncated.rtck"
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 2 --resume "$work/truncated.rtck" --run-dir "$work/c3" > "$work/log" 2>&1
  expect_fail "$work/log" nonzero "truncated.rtck: .*truncated" 2 $?
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --model logreg --epochs 2 --resume "$ck" --run-dir "$work/c4" > "$work/log" 2>&1
  expect_fail "$work/log" nonzero "checkpoint is of model 'lenet5'" 2 $?
  "$bin" inspect "$work/flipped.rtck" > "$work/log" 2>&1
  code=$?
  [[ $code -eq 1 ]] && grep -q "CRC32 mismatch" "$work/log" || fail "inspect of a corrupt checkpoint: exit $code"
  ;;
nan)
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 3 --lr 1e30 --run-dir "$work/n" > "$work/log" 2>&1
  expect_fail "$work/log" nonzero "loss became (NaN|Inf) at step [0-9]+" 2 $?
  ;;
usage)
  "$bin" train --epochs -3 > "$work/log" 2>&1; code=$?
  [[ $code -eq 2 ]] || fail "--epochs -3: exit $code, expected 2"
  "$bin" train --no-such-flag > "$work/log" 2>&1; code=$?
  [[ $code -eq 2 ]] && grep -q "no-such-flag" "$work/log" || fail "unknown flag: exit $code"
  "$bin" train --snapshot-every -1 --dataset synthetic --quiet > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" 2 "--snapshot-every must be >= 0" 1 $code
  "$bin" train --snapshot-every 5 --mode async --dataset synthetic --quiet > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" 2 "--snapshot-every applies to --mode sync" 1 $code
  "$bin" train --model resnet999 --dataset synthetic --quiet > "$work/log" 2>&1; code=$?
  [[ $code -eq 2 ]] && grep -q "resnet999" "$work/log" || { cat "$work/log"; fail "unknown model: exit $code"; }
  # models: torchvision's parameter counts at 224x224, and bad sizes named by their flag.
  "$bin" models --input 3x224x224 --classes 1000 > "$work/models" || fail "models --input 3x224x224 exited non-zero"
  for want in "^resnet18 .* 11689512 " "^resnet50 .* 25557032 " "^mobilenetv2 .* 3504872 "; do
    grep -q -- "$want" "$work/models" || { cat "$work/models"; fail "models at 224x224 lacks '$want'"; }
  done
  "$bin" models --model resnet18 --input 3x16x16 > "$work/log" 2>&1; code=$?
  one_line_error "$work/log" $code 2 "--input 3x16x16: model resnet18"
  "$bin" models --classes 1 > "$work/log" 2>&1; code=$?
  [[ $code -eq 2 ]] && grep -q -- "--classes" "$work/log" || { cat "$work/log"; fail "models --classes 1: exit $code"; }
  # models --plan: resnet20's fusions, reorders and planned memory; unfused on request.
  "$bin" models --model resnet20 --plan --plan-batch 2 > "$work/plan" || fail "models --plan exited non-zero"
  for want in "^plan resnet20 input 1x28x28 batch 2 train fp32, fusions on" "relu1 .* runs in bn1" \
      "^fused: 10 batch norm + ReLU, 0 convolution + ReLU, 9 add + ReLU" "^reorders per step: " "planned by liveness"; do
    grep -q -- "$want" "$work/plan" || { cat "$work/plan"; fail "models --plan lacks '$want'"; }
  done
  "$bin" models --model resnet20 --plan --plan-batch 2 --no-fusions > "$work/plan" || fail "--no-fusions exited non-zero"
  grep -q "^fused: 0 batch norm + ReLU" "$work/plan" || { cat "$work/plan"; fail "models --plan --no-fusions fused"; }
  "$bin" models --model resnet20 --plan --plan-batch 0 > "$work/log" 2>&1; code=$?
  [[ $code -eq 2 ]] && grep -q -- "--plan-batch" "$work/log" || { cat "$work/log"; fail "--plan-batch 0: exit $code"; }
  "$bin" train --data-dir /nonexistent/data > "$work/log" 2>&1; code=$?
  [[ $code -ne 0 ]] && grep -q "/nonexistent/data" "$work/log" || { cat "$work/log"; fail "missing data: exit $code"; }
  "${mpi[@]}" -np 3 "$bin" train "${data[@]}" --global-batch-size 32 > "$work/log" 2>&1; code=$?
  [[ $code -ne 0 ]] && grep -q "not divisible by the 3 ranks" "$work/log" || { cat "$work/log"; fail "global batch: exit $code"; }
  # Captured first: grep -q closing a pipe early would SIGPIPE the writer under pipefail.
  "$bin" --help > "$work/help" || fail "--help exited non-zero"
  grep -q "train" "$work/help" || fail "--help does not list train"
  "$bin" train --help > "$work/help" || fail "train --help exited non-zero"
  grep -q -- "--allreduce" "$work/help" || fail "train --help does not list --allreduce"
  # No CLI11 leftovers ({false} after negated flags, a validator's [-1 - 1073741824]), and
  # the footer on exit codes, signals and threads.
  ! grep -qE -- '\{false\}|\[-1 - ' "$work/help" || fail "train --help shows CLI11 leftovers: $(grep -E -- '\{false\}|\[-1 - ' "$work/help")"
  for want in "^Exit status:" "^  75  stopped by a signal" "^Signals: SIGTERM" "^Threads: " "--threads INT" "--log-every INT=10"; do
    grep -q -- "$want" "$work/help" || fail "train --help lacks '$want'"
  done
  # Bounds read as a person writes them, in --help and in the usage error (CLI11's own Range
  # printed a double's limits: "Value -3 not in range 0.000000 to 1797693..."), also through a
  # config file; a value that is no number says so.
  for want in "--stall-timeout FLOAT:(>= 0)=600" "--servers INT:(>= 1)=1" "--synthetic-classes INT:(from 2 to 100000)=10"; do
    grep -qF -- "$want" "$work/help" || fail "train --help lacks '$want'"
  done
  ! grep -qE '0\.000000|[0-9]{20}' "$work/help" || fail "train --help shows a double's limits"
  for args in "--stall-timeout -3|--stall-timeout: must be >= 0 (got -3)" \
              "--stall-timeout x|--stall-timeout: must be a number >= 0 (got 'x')" \
              "--mode async --servers 0|--servers: must be >= 1 (got 0)" \
              "--synthetic-classes 1|--synthetic-classes: must be from 2 to 100000 (got 1)"; do
    read -ra flags <<<"${args%%|*}"
    "$bin" train "${flags[@]}" > "$work/log" 2>&1; code=$?
    [[ $code -eq 2 ]] && grep -qxF "ringtrain: usage error: ${args#*|}" "$work/log" \
      || { cat "$work/log" >&2; fail "${args%%|*}: exit $code, expected 2 and '${args#*|}'"; }
  done
  "$bin" eval --checkpoint none.rtck --batch-size 0 > "$work/log" 2>&1; code=$?
  [[ $code -eq 2 ]] && grep -qF -- "--batch-size: must be >= 1 (got 0)" "$work/log" || { cat "$work/log" >&2; fail "eval --batch-size 0: exit $code"; }
  printf 'stall-warning = -1\n' > "$work/bound.toml"
  "$bin" train --config "$work/bound.toml" > "$work/log" 2>&1; code=$?
  [[ $code -eq 2 ]] && grep -qF "key 'stall-warning': --stall-warning: must be >= 0 (got -1)" "$work/log" \
    || { cat "$work/log" >&2; fail "stall-warning = -1 in a config file: exit $code"; }
  # A run's config.json given to --config: exit 2, one line pointing at config.toml.
  echo '{"epochs": 1}' > "$work/c.json"
  "$bin" train --config "$work/c.json" > "$work/log" 2>&1
  code=$?
  [[ $code -eq 2 && $(wc -l < "$work/log") -eq 1 ]] && grep -q "JSON is not read.*config.toml" "$work/log" \
    || { cat "$work/log" >&2; fail "--config x.json: exit $code"; }
  ;;
tensorboard)
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
  ;;
config_file)
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
  ;;
bad_checkpoints)
  # Every bad checkpoint: exit 1 or 2, a one-line error naming the file, nothing written.
  "${mpi[@]}" -np 1 "$bin" train "${data[@]}" --epochs 1 --checkpoint-every 1 --run-dir "$work/b" || fail "training failed"
  ck=$(ls "$work/b/checkpoints"/ckpt-*.rtck | tail -1)
  mkdir -p "$work/dir.rtck"
  "$bin" inspect "$work/dir.rtck" > "$work/log" 2>&1; one_line_error "$work/log" $? 1 "dir.rtck: is a directory"
  "${mpi[@]}" -np 2 "$bin" eval --checkpoint "$work/dir.rtck" > "$work/log" 2>&1
  expect_fail "$work/log" nonzero "dir.rtck: is a directory" 2 $?
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 2 --resume "$work/dir.rtck" --run-dir "$work/b2" > "$work/log" 2>&1
  expect_fail "$work/log" nonzero "dir.rtck: is a directory" 2 $?
  # Damaged metadata with valid checksums: rebuilt by the format's own rules.
  damage() {  # damage <in> <out> <python expression that edits the dict m>
    $py - "$1" "$2" "$3" <<'PY'
import json, struct, sys, zlib
src, dst, edit = sys.argv[1:]
b = open(src, "rb").read()
count = struct.unpack_from("<I", b, 12)[0]
secs = []
for i in range(count):
    e = 16 + 40 * i
    name = b[e:e + 16]
    off, size = struct.unpack_from("<QQ", b, e + 16)
    secs.append([name, b[off:off + size]])
m = json.loads(secs[0][1])
exec(edit)
secs[0][1] = json.dumps(m).encode()
head = bytearray(b[:16])
off = 16 + 40 * count + 4
for name, payload in secs:
    head += name + struct.pack("<QQII", off, len(payload), zlib.crc32(payload), 0)
    off += len(payload)
head += struct.pack("<I", zlib.crc32(bytes(head)))
open(dst, "wb").write(bytes(head) + b"".join(p for _, p in secs))
PY
  }
  damage "$ck" "$work/same.rtck" "pass"
  "$bin" inspect "$work/same.rtck" > /dev/null || fail "the checkpoint rebuilt unchanged does not load"
  i=0
  for edit_and_pattern in \
      "del m['epoch']|key 'epoch': expected an integer .*the key is missing" \
      "m['epoch'] = 'three'|key 'epoch': expected an integer" \
      "m['step_in_epoch'] = -1000|key 'step_in_epoch': expected an integer in \\[0, [0-9]+\\], got -1000" \
      "m['epoch'] = 2**31|key 'epoch': .*got 2147483648" \
      "m['config']['dataset'] = 'imagenet'|key 'config.dataset': expected one of" \
      "m['config']['synthetic_train'] = 10**12|key 'config.synthetic_train': expected a sample count"; do
    i=$((i + 1))
    edit=${edit_and_pattern%%|*}
    pattern=${edit_and_pattern#*|}
    damage "$ck" "$work/m$i.rtck" "$edit"
    cp "$work/m$i.rtck" "$work/m$i.orig"
    "$bin" inspect "$work/m$i.rtck" > "$work/log" 2>&1; one_line_error "$work/log" $? 1 "m$i.rtck: meta: $pattern"
    # The same validation serves eval and resume: two cases under mpirun keep this short.
    if [[ $i -eq 1 || $i -eq 6 ]]; then
    "${mpi[@]}" -np 2 "$bin" eval --checkpoint "$work/m$i.rtck" > "$work/log" 2>&1
    expect_fail "$work/log" nonzero "m$i.rtck: meta: $pattern" 2 $?
    "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 2 --resume "$work/m$i.rtck" --run-dir "$work/r$i" > "$work/log" 2>&1
    expect_fail "$work/log" nonzero "m$i.rtck: meta: $pattern" 2 $?
    fi
    cmp -s "$work/m$i.rtck" "$work/m$i.orig" || fail "m$i.rtck was modified"
  done
  cat "$ck" > "$work/trailing.rtck"; printf 'xyz' >> "$work/trailing.rtck"
  "$bin" inspect "$work/trailing.rtck" > "$work/log" 2>&1
  one_line_error "$work/log" $? 1 "trailing.rtck: trailer: 3 unexpected bytes after the last section"
  "${mpi[@]}" -np 1 "$bin" eval --checkpoint "$ck" --batch-size 2000000000 > "$work/log" 2>&1
  expect_fail "$work/log" 2 "--batch-size 2000000000 .* needs 6.27 TB" 1 $?
  ;;
bad_sizes)
  # Sizes checked up front, naming the flag and the memory (not a bare std::bad_alloc).
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --synthetic-train 1000000000000 --run-dir "$work/big" > "$work/log" 2>&1
  expect_fail "$work/log" 2 "--synthetic-train 1000000000000 .* needs 785 TB, more than this machine's" 2 $?
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --eval-batch-size 2000000000 --run-dir "$work/big" > "$work/log" 2>&1
  expect_fail "$work/log" 2 "--eval-batch-size 2000000000 .* needs 6.27 TB" 2 $?
  [[ ! -e $work/big ]] || fail "a refused run created its run directory"
  "$bin" trian --epochs 1 > "$work/log" 2>&1; code=$?
  [[ $code -eq 2 ]] && grep -q "unknown command 'trian'" "$work/log" || { cat "$work/log"; fail "unknown command: exit $code"; }
  ;;
full_disk)
  # A full disk under a log: the run ends with an error naming the file (never goes on
  # with logs that silently stopped). /dev/full fails every write with ENOSPC.
  mkdir -p "$work/f1" "$work/f2"
  ln -s /dev/full "$work/f1/metrics.csv"
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 1 --run-dir "$work/f1" > "$work/log" 2>&1; code=$?
  [[ $code -ne 0 ]] && grep -qE "error: .*f1/metrics.csv: write failed: No space left" "$work/log" \
    || { cat "$work/log" >&2; fail "full metrics.csv: exit $code"; }
  ln -s /dev/full "$work/f2/rank-1.jsonl"
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 1 --run-dir "$work/f2" > "$work/log" 2>&1; code=$?
  [[ $code -ne 0 ]] && grep -qE "\[rank 1\] error: .*f2/rank-1.jsonl: write failed: No space left" "$work/log" \
    || { cat "$work/log" >&2; fail "full rank-1.jsonl: exit $code"; }
  [[ ! -e $work/f2/summary.json && ! -e $work/f2/summary.json.tmp ]] || fail "summary.json written after a failed log"
  ;;
tuning)
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
  ;;
torn_log)
  # A rank killed mid-record leaves a torn last line: trace and the report read the rest
  # and warn; a bad line inside a log is still an error naming file and line.
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 1 --run-dir "$work/t" || fail "training failed"
  printf '{"type":"step","t":1.5,"data_s":0.0' >> "$work/t/rank-1.jsonl"
  lines=$(wc -l < "$work/t/rank-1.jsonl")
  "$bin" trace "$work/t" > "$work/log" 2>&1 || { cat "$work/log" >&2; fail "trace rejected a torn last line"; }
  grep -q "warning: .*rank-1.jsonl:$((lines + 1)): ignoring the truncated last line" "$work/log" \
    || { cat "$work/log" >&2; fail "trace did not warn about the torn line"; }
  [[ -s $work/t/trace.json ]] || fail "no trace.json"
  MPLBACKEND=Agg $py "$(dirname "$0")/../../scripts/plot/run_report.py" "$work/t" > "$work/log" 2>&1 \
    || { cat "$work/log" >&2; fail "run_report.py rejected a torn last line"; }
  grep -q "rank-1.jsonl:$((lines + 1)): ignoring the truncated last line" "$work/log" || fail "run_report.py did not warn"
  # Resuming appends after the torn line only once it is cut away.
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 1 --run-dir "$work/t2" --checkpoint-every 1 || fail "training failed"
  printf '{"type":"st' >> "$work/t2/rank-0.jsonl"
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 2 --run-dir "$work/t2" --resume auto || fail "resume failed"
  "$bin" trace "$work/t2" > "$work/log" 2>&1 || { cat "$work/log" >&2; fail "trace after resume"; }
  grep -q "warning" "$work/log" && { cat "$work/log" >&2; fail "the resumed log still holds the torn line"; }
  grep -q "dropped the torn last line" "$work/t2/rank-0.jsonl" || fail "no event about the dropped line"
  # A damaged line inside a log stays an error.
  sed -i '2s/.*/{"type":/' "$work/t/rank-0.jsonl"
  "$bin" trace "$work/t" > "$work/log" 2>&1; code=$?
  [[ $code -eq 1 ]] && grep -q "rank-0.jsonl:2:" "$work/log" || { cat "$work/log" >&2; fail "bad inner line: exit $code"; }
  ;;
stall)
  # SIGSTOP one rank: the other warns once, naming step, bucket, operation and the stopped
  # rank, then ends the job with an error naming it, within a bounded time.
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --synthetic-train 8192 --epochs 50 --stall-warning 1 \
    --stall-timeout 4 --run-dir "$work/s" > "$work/log" 2>&1 &
  launcher=$!
  for _ in $(seq 1 150); do
    sleep 0.2
    (( $(cat "$work/s/rank-0.jsonl" 2>/dev/null | grep -c '"type":"step"') >= 5 )) && break
  done
  stopped=1
  other=0
  pid=$(rank_pid $launcher $stopped) || { cat "$work/log" >&2; fail "no rank to stop"; }
  trap 'kill -CONT $pid 2>/dev/null; kill -KILL $pid 2>/dev/null; rm -rf "$work"' EXIT
  kill -STOP "$pid"
  start=$(date +%s)
  while kill -0 $launcher 2>/dev/null; do
    sleep 0.5
    (( $(date +%s) - start > 60 )) && { kill -KILL $launcher; cat "$work/log" >&2; fail "job still running 60 s after SIGSTOP"; }
  done
  wait $launcher && { cat "$work/log" >&2; fail "mpirun exited 0 after a stall"; }
  # Stopped inside the gradient ring the peer is named; inside MPI's own all-reduce of the
  # step's metrics (no single peer) the warning says "every rank"; either way the side
  # channel names the stopped rank and its host.
  grep -qE "\[rank $other\] warning: stalled for [0-9]+ s at step [0-9]+ \(training\), .*in (ring all-reduce .*waiting for rank $stopped|all-reduce of metrics .*waiting for every rank); stalled rank\(s\): rank $stopped on $(hostname) \[" \
    "$work/log" || { cat "$work/log" >&2; fail "no stall warning naming rank $stopped"; }
  [[ $(grep -c "\[rank $other\] warning: stalled" "$work/log") -eq 1 ]] || { cat "$work/log" >&2; fail "more than one warning"; }
  grep -qE "\[rank $other\] error: stall timeout: .*stalled rank\(s\): rank $stopped on $(hostname) \[silent" "$work/log" \
    || { cat "$work/log" >&2; fail "no timeout error naming rank $stopped"; }
  # The stopped rank, resumed by mpirun's teardown, must not blame the peer that waited.
  grep -q "\[rank $stopped\] error: stall timeout" "$work/log" && { cat "$work/log" >&2; fail "the stopped rank blamed its peer"; }
  ;;
logical_shards)
  # --logical-shards 4: the same final parameters at np 1 and np 2 (model.rtck's CRC), a
  # rank count that does not divide S refused on every rank, and the flags it excludes.
  shards=(--logical-shards 4 --batch-size 4 --max-steps 12 --threads 1 --lr-schedule constant)
  for np in 1 2; do
    "${mpi[@]}" -np $np "$bin" train "${data[@]}" "${shards[@]}" --run-dir "$work/np$np" > "$work/log$np" 2>&1 \
      || { cat "$work/log$np" >&2; fail "--logical-shards 4 at np $np failed"; }
  done
  $py -c 'import json,sys; c=json.load(open(sys.argv[1])); assert c["logical_shards"] == 4 and c["global_batch_size"] == 16, c' \
    "$work/np2/config.json" || fail "config.json lacks logical_shards 4 / global batch 16"
  a=$(params_crc "$work/np1/model.rtck") && b=$(params_crc "$work/np2/model.rtck") || fail "inspect failed"
  [[ -n $a && $a == "$b" ]] || fail "params CRC at np 1 ($a) differs from np 2 ($b)"
  # The exact sum's step records split its all-reduce: wait_s (inside MPI) + convert_s (its own
  # work) <= allreduce_s, convert_s > 0 (every step copies and converts the gradients).
  $py - "$work/np2/rank-1.jsonl" <<'PY' || fail "step records lack a consistent convert_s"
import json, sys
steps = [r for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "step"]
assert steps, "no step records"
for r in steps:
    assert r["convert_s"] > 0 and r["wait_s"] >= 0, r
    assert r["wait_s"] + r["convert_s"] <= r["allreduce_s"] + 1e-9, r
PY
  "${mpi[@]}" -np 3 "$bin" train "${data[@]}" "${shards[@]}" --run-dir "$work/np3" > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" 2 "--logical-shards 4 is not divisible by the 3 ranks" 3 $code
  [[ $(grep -c "error:" "$work/log") -eq 3 ]] || { cat "$work/log" >&2; fail "expected one error line per rank"; }
  "$bin" train "${data[@]}" --logical-shards 4 --accumulate 2 > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" 2 "--logical-shards runs each rank's shards through the accumulation path" 1 $code
  "$bin" train "${data[@]}" --logical-shards 4 --global-batch-size 30 > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" 2 "--global-batch-size 30 is not divisible by --logical-shards 4" 1 $code
  ;;
snapshots)
  # --snapshot-every: removed from RAM when the run ends normally (the default directory under
  # /dev/shm, named in summary.json); kept when a rank is killed (SIGKILL), and then
  # `--resume auto` with the same --run-dir (what run.sh --elastic relaunches) continues from
  # the newest complete one, skipping a torn newest one with a warning, to the same final
  # parameters as an uninterrupted run (logical shards).
  snap=(--logical-shards 2 --batch-size 4 --threads 1 --lr-schedule constant --eval-every 0 --no-tensorboard)
  # The reference, uninterrupted, with snapshots in the default directory. The slow-copy hook
  # (1 ms) makes each snapshot wait for the previous one to be sealed instead of leaving it to
  # the snapshot thread's copy when the update found it still being written (a loaded host).
  "${mpi[@]}" -np 2 -x RINGTRAIN_TEST_SNAPSHOT_SLOW_COPY_MS=1 "$bin" train "${data[@]}" "${snap[@]}" --max-steps 40 --snapshot-every 4 \
    --run-dir "$work/ref" > "$work/ref.log" 2>&1 || { cat "$work/ref.log" >&2; fail "run with snapshots failed"; }
  # Each captured by its step's optimizer update (SnapshotWriter::arm), or, where the host has a
  # core the two ranks' threads leave idle (more than 2 online CPUs: logical shards run no
  # communication thread), each copied by the snapshot thread there; summary.json names which.
  dir=$($py -c '
import json, sys
s = json.load(open(sys.argv[1]))["snapshots"]
assert s["written"] >= 1, s
assert s["copy"] == ("thread" if int(sys.argv[2]) > 2 else "update"), (s, sys.argv[2])
assert s["captured_in_update"] == (s["written"] if s["copy"] == "update" else 0), s
print(s["dir"])' "$work/ref/summary.json" "$(getconf _NPROCESSORS_ONLN)") || fail "summary.json: no snapshot written, or not copied where the cores say"
  [[ $dir == /dev/shm/ringtrain-ref-* ]] || fail "default snapshot dir is $dir"
  [[ ! -e $dir ]] || fail "snapshots in $dir not removed at the normal end"
  # Killed mid-run: rank 1 (the straggler, 50 ms per step) by SIGKILL once two snapshots exist.
  run=("$bin" train "${data[@]}" "${snap[@]}" --max-steps 40 --snapshot-every 5 --snapshot-dir "$work/ram"
       --run-dir "$work/k")
  "${mpi[@]}" -np 2 "${run[@]}" --straggler-ms 50 > "$work/k.log" 2>&1 &
  launcher=$!
  for _ in $(seq 1 300); do
    sleep 0.05
    (( $(ls "$work"/ram/node-0-of-1/snap-*.rtck 2>/dev/null | wc -l) >= 2 )) && break
  done
  pid=$(rank_pid $launcher 1) || { cat "$work/k.log" >&2; fail "no rank to kill"; }
  kill -KILL "$pid"
  wait $launcher && fail "mpirun exited 0 after a rank was killed"
  newest=$(ls "$work"/ram/node-0-of-1/snap-*.rtck | tail -1)
  [[ -n $newest ]] || fail "no snapshot kept after the failure"
  [[ $(basename "$newest") != snap-000000040.rtck ]] || fail "the run finished before the kill"
  head -c 1000 "$newest" > "$work/torn" && mv "$work/torn" "$newest"
  "${mpi[@]}" -np 2 "${run[@]}" --resume auto > "$work/r.log" 2>&1 || { cat "$work/r.log" >&2; fail "resume failed"; }
  grep -q "warning: skipping snapshot $newest: .*truncated.*; trying the previous one" "$work/r.log" \
    || { cat "$work/r.log" >&2; fail "no warning for the torn snapshot"; }
  grep -q "resumed from snapshot $work/ram/node-0-of-1/snap-" "$work/r.log" || { cat "$work/r.log" >&2; fail "not resumed from a snapshot"; }
  $py -c 'import json,sys; r=json.load(open(sys.argv[1]))["resumed_from"]; assert r["kind"] == "snapshot" and r["path"] != sys.argv[2], r' \
    "$work/k/summary.json" "$newest" || fail "summary.json: resumed_from is not the previous snapshot"
  [[ $(params_crc "$work/k/model.rtck") == $(params_crc "$work/ref/model.rtck") ]] \
    || fail "parameters resumed from the snapshot differ from the uninterrupted run"
  [[ ! -e $work/ram ]] || fail "snapshots not removed after the resumed run ended"
  ;;
snapshot_killed_writing)
  # Nothing lost when a node dies mid-write: rank 0 is killed (SIGKILL, the whole process) while its snapshot
  # thread is sealing the snapshot of step 15, at a point the test names through the test
  # hook RINGTRAIN_TEST_SNAPSHOT_KILL_AT (SnapshotWriter.h): step 15's file is left half
  # written under its temporary name, step 10's stays whole, and `--resume auto` continues
  # from step 10 to the bits of an uninterrupted run (logical shards).
  snap=(--logical-shards 2 --batch-size 4 --threads 1 --lr-schedule constant --eval-every 0 --no-tensorboard
        --max-steps 30)
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" "${snap[@]}" --run-dir "$work/ref" > "$work/ref.log" 2>&1 \
    || { cat "$work/ref.log" >&2; fail "uninterrupted run failed"; }
  run=("$bin" train "${data[@]}" "${snap[@]}" --snapshot-every 5 --snapshot-dir "$work/ram" --run-dir "$work/k")
  "${mpi[@]}" -np 2 -x RINGTRAIN_TEST_SNAPSHOT_KILL_AT=15 "${run[@]}" > "$work/k.log" 2>&1 \
    && { cat "$work/k.log" >&2; fail "mpirun exited 0 although rank 0 was killed while writing a snapshot"; }
  node=$work/ram/node-0-of-1
  files=$(cd "$node" && echo *)
  [[ $files == "slot-2.tmp snap-000000005.rtck snap-000000010.rtck" ]] \
    || { cat "$work/k.log" >&2; fail "after the kill $node holds: $files"; }
  # The half-written one is really torn: it does not read back as a checkpoint.
  "$bin" inspect "$node/slot-2.tmp" > /dev/null 2>&1 && fail "the snapshot being written when killed reads back whole"
  "${mpi[@]}" -np 2 "${run[@]}" --resume auto > "$work/r.log" 2>&1 || { cat "$work/r.log" >&2; fail "resume failed"; }
  grep -q "resumed from snapshot $node/snap-000000010.rtck" "$work/r.log" \
    || { cat "$work/r.log" >&2; fail "not resumed from step 10's snapshot"; }
  [[ $(params_crc "$work/k/model.rtck") == $(params_crc "$work/ref/model.rtck") ]] \
    || fail "parameters resumed after the kill differ from the uninterrupted run"
  ;;
folder)
  # --dataset folder end to end (MAKE_IMAGE_FOLDER: test/images/make_image_folder): usage
  # errors exit 2 on every rank; a file of another size without --crop, and a bad image met
  # mid-epoch, end every rank with an error naming it (no hang); --bad-images skip lists it.
  "$MAKE_IMAGE_FOLDER" photos "$work/ph" 64 16 > /dev/null || fail "make_image_folder photos"
  folder=(--dataset folder --data-dir "$work/ph" --model lenet5 --batch-size 8 --epochs 1 --quiet)
  "${mpi[@]}" -np 2 "$bin" train "${folder[@]}" --crop random-resized:32 --augment > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" 2 "--augment .* --crop" 2 $code
  "${mpi[@]}" -np 2 "$bin" train "${folder[@]}" --crop 32 > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" 2 "--crop: expected random-resized:SIZE" 2 $code
  "$bin" train "${data[@]}" --crop random-resized:32 > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" 2 "--crop applies to --dataset folder or packed only" 1 $code
  "${mpi[@]}" -np 2 "$bin" train "${folder[@]}" > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" nonzero "img[0-9]+\\.jpg: [0-9]+x[0-9]+ pixels, expected 48x48" 2 $code
  "$bin" datasets --dataset folder --data-dir "$work/ph" --crop random-resized:32 --time --loader-threads 2 > "$work/log" 2>&1 \
    || { cat "$work/log"; fail "datasets --time failed"; }
  grep -qE "one epoch: 64 images decoded and augmented .* on 2 loader thread\(s\): [0-9]+ images/s" "$work/log" \
    || { cat "$work/log"; fail "datasets --time printed no rate"; }
  grep -qE "class +3 class3 +16 images" "$work/log" || { cat "$work/log"; fail "no per-class count"; }
  # A JPEG cut to 3/4 (its header intact, so the run starts): met mid-epoch by the loader
  # threads of the one rank whose shard holds it; the other hears of it at the step's agreement.
  f=$(ls "$work/ph/train/class2/" | head -1)
  p="$work/ph/train/class2/$f"
  head -c $(($(stat -c %s "$p") * 3 / 4)) "$p" > "$work/cut" && mv "$work/cut" "$p"
  "${mpi[@]}" -np 2 "$bin" train "${folder[@]}" --crop random-resized:32 --loader-threads 2 --run-dir "$work/bad" \
    > "$work/log" 2>&1; code=$?
  [[ $code -ne 0 ]] || { cat "$work/log"; fail "a bad image mid-epoch: exit 0"; }
  # Both ranks report the same line (the one that read it gathered to the other at the agreement).
  [[ $(grep -cE "ringtrain: \[rank [01]\] error: rank [01] could not load its batch of step [0-9]+: .*$f: Premature end of JPEG file, expected a complete JPEG" "$work/log") -eq 2 ]] \
    || { cat "$work/log"; fail "not both ranks named $f"; }
  [[ $(grep -E "error: rank [01] could not load" "$work/log" | sed 's/.*error: //' | sort -u | wc -l) -eq 1 ]] \
    || { cat "$work/log"; fail "the ranks' lines differ"; }
  "${mpi[@]}" -np 2 "$bin" train "${folder[@]}" --crop random-resized:32 --bad-images skip --run-dir "$work/skip" \
    > "$work/log" 2>&1 || { cat "$work/log"; fail "--bad-images skip failed"; }
  $py - "$work/skip/summary.json" "$f" <<'PY' || fail "summary.json does not list the skipped image"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["bad_images_skipped"] == 1 and sys.argv[2] in s["bad_images"][0], s.get("bad_images")
assert all(r["loader_threads"] >= 1 for r in s["ranks"]), s["ranks"]
PY
  "$bin" eval --checkpoint "$work/skip/model.rtck" > "$work/log" 2>&1 || { cat "$work/log"; fail "eval of a folder run failed"; }
  grep -q "16 test samples" "$work/log" || { cat "$work/log"; fail "eval did not use the folder's val/"; }
  ;;
packed)
  # ringtrain pack and --dataset packed end to end: a folder of photos packed as JPEG at a
  # max side, refused over itself, described and timed, trained on at np 2 with the block
  # shuffle and evaluated; a flipped byte, a truncated and a missing shard end every rank.
  "$MAKE_IMAGE_FOLDER" photos "$work/ph" 64 16 > /dev/null || fail "make_image_folder photos"
  "$bin" pack --dataset folder --data-dir "$work/ph" --out "$work/sh" --max-side 40 --quality 85 --shard-mb 0.05 \
    > "$work/log" 2>&1 || { cat "$work/log"; fail "pack failed"; }
  grep -qE "wrote .*: 64 training and 16 validation records in [0-9]+ shards" "$work/log" || { cat "$work/log"; fail "pack said"; }
  "$bin" pack --dataset folder --data-dir "$work/ph" --out "$work/sh" > "$work/log" 2>&1
  one_line_error "$work/log" $? 2 "--out .*: not empty; pass --overwrite"
  "$bin" datasets --dataset packed --data-dir "$work/sh" --crop random-resized:32 --time --loader-threads 2 > "$work/log" 2>&1 \
    || { cat "$work/log"; fail "datasets --time of packed shards failed"; }
  grep -qE "one epoch: 64 images decoded and augmented .* on 2 loader thread\(s\): [0-9]+ images/s" "$work/log" \
    || { cat "$work/log"; fail "datasets --time printed no rate"; }
  grep -qE "train: 64 records in 4 classes, [0-9]+ shard\(s\)" "$work/log" || { cat "$work/log"; fail "no packed report"; }
  packed=(--dataset packed --data-dir "$work/sh" --model lenet5 --batch-size 6 --epochs 1 --quiet --crop random-resized:32)
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 1 --shuffle block > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" 2 "--shuffle block reads the blocks of packed shards" 2 $code
  "${mpi[@]}" -np 2 "$bin" train "${packed[@]}" --shuffle block --shuffle-block-mb 0.01 --loader-threads 2 \
    --run-dir "$work/run" > "$work/log" 2>&1 || { cat "$work/log"; fail "training on packed shards failed"; }
  $py - "$work/run/summary.json" <<'PY' || fail "summary.json: the samples an epoch leaves out"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["shuffle"] == "block" and s["train_samples"] == 64, s
assert s["train_samples_per_epoch"] == 60 and s["dropped_per_epoch"] == 4, s  # 5 steps of 2 x 6
PY
  "$bin" eval --checkpoint "$work/run/model.rtck" > "$work/log" 2>&1 || { cat "$work/log"; fail "eval of a packed run failed"; }
  grep -q "16 test samples" "$work/log" || { cat "$work/log"; fail "eval did not use the packed val split"; }
  # A flipped byte in the middle of the first shard: met mid-epoch by one rank's loader.
  s0=$work/sh/train-00000.shard
  printf '\x5a' | dd of="$s0" bs=1 seek=$(($(stat -c %s "$s0") / 2)) conv=notrunc status=none
  "${mpi[@]}" -np 2 "$bin" train "${packed[@]}" --loader-threads 2 --run-dir "$work/bad" > "$work/log" 2>&1; code=$?
  [[ $code -ne 0 ]] || { cat "$work/log"; fail "a flipped byte: exit 0"; }
  [[ $(grep -cE "ringtrain: \[rank [01]\] error: rank [01] could not load its batch of step [0-9]+: .*train-00000\.shard: record [0-9]+ of train at byte [0-9]+: (checksum mismatch|record header)" "$work/log") -eq 2 ]] \
    || { cat "$work/log"; fail "not both ranks named the shard and record"; }
  [[ $(grep -E "error: rank [01] could not load" "$work/log" | sed 's/.*error: //' | sort -u | wc -l) -eq 1 ]] \
    || { cat "$work/log"; fail "the ranks' lines differ"; }
  cp "$s0" "$work/s0" && head -c 1000 "$work/s0" > "$s0"
  "${mpi[@]}" -np 2 "$bin" train "${packed[@]}" > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" nonzero "train-00000\.shard: 1000 bytes, the index expects [0-9]+ \(truncated\)" 2 $code
  rm "$s0"
  "${mpi[@]}" -np 2 "$bin" train "${packed[@]}" > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" nonzero "train-00000\.shard: cannot open shard \(No such file or directory\)" 2 $code
  ;;
*)
  fail "unknown case $case_name"
  ;;
esac
echo "PASS: $case_name"
