# Cases of cli_test.sh (sourced by it; the variables and helpers are its own).
# Signals and stops: SIGTERM + resume, signal storms, a slow mpirun, SIGKILL, the stall watchdog, snapshots and a writer killed mid-write.
# shellcheck shell=bash disable=SC2154

case_resume_sigterm() {
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
}

case_signal_storm() {
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
}

case_sigterm_mpirun_slow() {
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
}

case_sigkill() {
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
}

case_stall() {
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
}

case_snapshots() {
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
}

case_snapshot_killed_writing() {
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
}
