#!/usr/bin/env bash
# Tests scripts/mpirun/sweep.sh end to end through run.sh and the real mpirun, with
# test/scripts/fake_ringtrain.py standing in for the trainer: the grid's runs and their
# directories, a failing run recorded while the sweep goes on, results.csv/report.md at the
# end, re-running skips finished runs and retries the failed one, strong scaling passes
# batch/np per rank and refuses a remainder, --dry-run runs nothing, a --launcher places
# ranks on nodes, --run-reports writes and links each run's report, and the mode axis (sync
# per all-reduce, async, sspK) passes each mode's flags and records them.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
sweep=$here/../../scripts/mpirun/sweep.sh
fake=$here/fake_ringtrain.py

out=$tmp/sw
export FAKE_RINGTRAIN_ARGS_LOG=$tmp/args.jsonl
# run.sh raises odls_base_sigkill_timeout to 10 s for checkpoints on SIGTERM, and Open MPI
# then also keeps a job whose rank failed for about twice that before it ends it; the failed
# runs below are about sweep.sh's bookkeeping, not that wait (README, Checkpoints).
export OMPI_MCA_odls_base_sigkill_timeout=1

# 1. 2 batch sizes x np 1,2, the batch-64 runs fail.
FAKE_RINGTRAIN_FAIL_BATCH=64 "$sweep" --batch-sizes 32,64 --ranks 1,2 --epochs 2 \
  --bin "$fake" --out "$out" -- --max-steps 7 >"$tmp/log1" 2>&1
rc=$?
[[ $rc -eq 1 ]] || fail "a sweep with failed runs exits 1, got $rc"
for name in b32-np1-ppn1-ring-ckptoff-r1 b32-np2-ppn2-ring-ckptoff-r1; do
  [[ -f $out/$name/summary.json ]] || fail "$name: no summary.json"
  grep -q '"status": "ok"' "$out/$name/sweep-run.json" 2>/dev/null || fail "$name: not ok"
done
[[ -f $out/b32-np2-ppn2-ring-ckptoff-r1/rank-1.jsonl ]] || fail "np2 run lacks rank-1.jsonl"
for name in b64-np1-ppn1-ring-ckptoff-r1 b64-np2-ppn2-ring-ckptoff-r1; do
  grep -q '"status": "failed"' "$out/$name/sweep-run.json" 2>/dev/null ||
    fail "$name: not recorded as failed"
  grep -q '"exit_code": 1' "$out/$name/sweep-run.json" 2>/dev/null || fail "$name: exit code"
  grep -q 'simulated out-of-memory' "$out/$name/launch.log" 2>/dev/null ||
    fail "$name: log lacks the error"
done
# The failure at np=1 did not stop the np=2 runs after it (the order is np, then batch).
grep -q 'b32-np2-ppn2-ring-ckptoff-r1: ok' "$tmp/log1" || fail "the sweep stopped after a failure"
# The extra train flags and the per-rank batch reached the trainer.
grep -q '"--max-steps", "7"' "$tmp/args.jsonl" || fail "pass-through train flags lost"
launches=$(grep -c . "$tmp/args.jsonl")
[[ $launches -eq 4 ]] || fail "expected 4 launches, got $launches"

csv=$out/results.csv
[[ -f $csv && -f $out/report.md ]] || fail "no results.csv / report.md"
[[ $(tail -n +2 "$csv" | grep -c .) -eq 4 ]] || fail "results.csv should have 4 rows"
head -1 "$csv" | grep -q '^name,model,dataset,scaling,batch_size,' || fail "results.csv header"
[[ $(grep -c ',failed,1,' "$csv") -eq 2 ]] || fail "results.csv should show 2 failed runs"
grep -q 'simulated out-of-memory' "$out/report.md" || fail "report.md lacks the failure"
# max-steps 7 -> every successful run took exactly 7 steps (last column but one)
for name in b32-np1-ppn1-ring-ckptoff-r1 b32-np2-ppn2-ring-ckptoff-r1; do
  steps=$(grep "^$name," "$csv" | awk -F, '{ print $(NF-1) }')
  [[ $steps == 7 ]] || fail "$name: steps $steps, expected 7"
done

# 2. Re-run without the failure: finished runs are skipped, failed ones retried.
: >"$tmp/args.jsonl"
"$sweep" --batch-sizes 32,64 --ranks 1,2 --epochs 2 --bin "$fake" --out "$out" \
  -- --max-steps 7 >"$tmp/log2" 2>&1
rc=$?
[[ $rc -eq 0 ]] || fail "the re-run should succeed, got $rc: $(tail -3 "$tmp/log2")"
[[ $(grep -c 'done, skipped' "$tmp/log2") -eq 2 ]] || fail "expected 2 skipped runs"
[[ $(grep -c . "$tmp/args.jsonl") -eq 2 ]] || fail "expected 2 new launches"
[[ $(grep -c ',ok,0,' "$csv") -eq 4 ]] || fail "all 4 runs ok after the re-run"
attempts=("$out"/.attempts/b64-np1-ppn1-ring-ckptoff-r1.*)
[[ -e ${attempts[0]} ]] || fail "the failed attempt should be kept under .attempts"

# 3. Strong scaling: per-rank batch = global / np; a remainder is refused before any run.
: >"$tmp/args.jsonl"
"$sweep" --scaling strong --batch-sizes 64 --ranks 2 --epochs 1 --bin "$fake" \
  --out "$tmp/strong" --no-report >/dev/null 2>&1 || fail "strong sweep failed"
grep -q '"--batch-size", "32"' "$tmp/args.jsonl" ||
  fail "strong scaling: per-rank batch should be 32"
[[ -f $tmp/strong/gb64-np2-ppn2-ring-ckptoff-r1/summary.json ]] || fail "strong run dir name"
"$sweep" --scaling strong --batch-sizes 64 --ranks 3 --bin "$fake" --out "$tmp/bad" >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "64 over 3 ranks must be refused with exit 2"
[[ ! -e $tmp/bad ]] || fail "a refused sweep must not create its directory"

# 4. --timeout: a hung run is killed and recorded as timed out.
FAKE_RINGTRAIN_SLEEP=30 "$sweep" --timeout 1 --bin "$fake" --out "$tmp/hung" --no-report \
  >/dev/null 2>&1
rc=$?
[[ $rc -eq 1 ]] || fail "a timed-out sweep exits 1, got $rc"
grep -q '"status": "timeout"' "$tmp/hung"/*/sweep-run.json 2>/dev/null ||
  fail "the hung run should be recorded as timeout"

# 5. --dry-run lists the grid and runs nothing; bad options exit 2.
: >"$tmp/args.jsonl"
lst=$("$sweep" --dry-run --batch-sizes 16,32,64 --ranks 1,2 --allreduce ring,ps \
  --checkpoint on,off --bin "$fake" --out "$tmp/dry")
[[ $(grep -c '^\[' <<<"$lst") -eq 24 ]] || fail "dry-run should list 3x2x2x2 = 24 runs"
grep -q 'b16-np2-ppn2-ps-ckpton-r1' <<<"$lst" || fail "dry-run names"
grep -q -- '--checkpoint-every 1 --checkpoint-dir' <<<"$lst" || fail "checkpoint flags"
[[ ! -s $tmp/args.jsonl && ! -e $tmp/dry ]] || fail "dry-run must not run anything"
for bad in "--ranks 0" "--allreduce tree" "--checkpoint maybe" "--scaling linear" "--bogus"; do
  # shellcheck disable=SC2086
  "$sweep" $bad --out "$tmp/x" >/dev/null 2>&1
  [[ $? -eq 2 ]] || fail "sweep.sh $bad should exit 2"
done

# 6. With a --launcher (an emulated or real cluster) ranks per node below the rank count are
#    placed by the launcher, not skipped as they are on this host alone.
lst=$("$sweep" --dry-run --ranks 2 --ppn 1 --bin "$fake" --out "$tmp/dry" 2>&1)
grep -q 'skipping np=2 ppn=1' <<<"$lst" || fail "np 2 ppn 1 on this host alone must be skipped"
printf '#!/bin/sh\nexit 0\n' >"$tmp/launcher.sh"
chmod +x "$tmp/launcher.sh"
lst=$("$sweep" --dry-run --ranks 2 --ppn 1 --launcher "$tmp/launcher.sh --nodes 2" --bin "$fake" \
  --out "$tmp/dry" 2>&1)
grep -q "b64-np2-ppn1-ring-ckptoff-r1" <<<"$lst" || fail "a launcher places np 2 at ppn 1"
grep -q -- "$tmp/launcher.sh --nodes 2 -np 2 --ppn 1 " <<<"$lst" ||
  fail "the launcher gets its own arguments, then -np and --ppn: $lst"

# 7. --run-reports: each run's report.md and plots, linked from the sweep's report; the
#    sweep's time split plot once a run has several ranks.
"$sweep" --batch-sizes 32 --ranks 1,2 --bin "$fake" --out "$tmp/rr" --run-reports \
  -- --max-steps 5 >"$tmp/log7" 2>&1 || fail "the --run-reports sweep failed: $(tail -3 "$tmp/log7")"
for name in b32-np1-ppn1-ring-ckptoff-r1 b32-np2-ppn2-ring-ckptoff-r1; do
  [[ -f $tmp/rr/$name/report.md && -f $tmp/rr/$name/plots/phases.png ]] ||
    fail "$name: no run report or phases.png"
  grep -q "\[report\]($name/report.md)" "$tmp/rr/report.md" || fail "$name: report not linked"
done
[[ -f $tmp/rr/plots/time_split.png ]] || fail "no plots/time_split.png"
grep -q '(plots/time_split.png)' "$tmp/rr/report.md" || fail "time_split.png not in report.md"

# 8. The mode axis: sync runs once per all-reduce, async and sspK once, with --mode async
#    --servers S [--max-staleness K] and no --allreduce; asynchronous runs need more ranks
#    than servers; the report gets the sync-vs-async table.
: >"$tmp/args.jsonl"
lst=$("$sweep" --dry-run --ranks 1,3 --modes sync,async,ssp0 --allreduce ring,ps --bin "$fake" \
  --out "$tmp/dry" 2>&1)
grep -q 'skipping async at np=1' <<<"$lst" || fail "async at np=1 must be skipped with a note"
grep -q 'skipping ssp0 at np=1' <<<"$lst" || fail "ssp0 at np=1 must be skipped with a note"
[[ $(grep -c '^\[' <<<"$lst") -eq 6 ]] || fail "modes: expected 6 runs (2 at np 1, 4 at np 3): $lst"
"$sweep" --ranks 3 --modes sync,async,ssp0 --allreduce ps --bin "$fake" --out "$tmp/modes" \
  -- --max-steps 6 >"$tmp/log8" 2>&1 || fail "the modes sweep failed: $(tail -3 "$tmp/log8")"
[[ $(grep -c . "$tmp/args.jsonl") -eq 3 ]] || fail "modes: expected 3 launches"
for name in b64-np3-ppn3-ps b64-np3-ppn3-async b64-np3-ppn3-ssp0; do
  [[ -f $tmp/modes/$name-ckptoff-r1/summary.json ]] || fail "modes: $name did not run"
done
py_check() { /usr/bin/python3 -c "$1" "$tmp" || fail "$2"; }
py_check 'import json, sys
runs = [json.loads(l)["argv"] for l in open(sys.argv[1] + "/args.jsonl")]
ssp = [a for a in runs if "--max-staleness" in a]
asy = [a for a in runs if "--mode" in a and "--max-staleness" not in a]
sync = [a for a in runs if "--mode" not in a]
ok = (len(ssp) == 1 and ssp[0][ssp[0].index("--max-staleness") + 1] == "0" and len(asy) == 1
      and all(a[a.index("--mode") + 1] == "async" and a[a.index("--servers") + 1] == "1"
              and "--allreduce" not in a for a in ssp + asy)
      and len(sync) == 1 and all("--allreduce" in a for a in sync))
sys.exit(0 if ok else 1)' "modes: the trainer flags of each mode"
py_check 'import json, sys
r = json.load(open(sys.argv[1] + "/modes/b64-np3-ppn3-ssp0-ckptoff-r1/sweep-run.json"))
s = json.load(open(sys.argv[1] + "/modes/b64-np3-ppn3-ps-ckptoff-r1/sweep-run.json"))
sys.exit(0 if (r["mode"], r["servers"], r["max_staleness"], r["allreduce"], r["global_batch"]) ==
         ("async", 1, 0, None, 128) and (s["mode"], s["allreduce"], s["servers"]) ==
         ("sync", "ps", None) else 1)' "modes: sweep-run.json records mode, servers and K"
grep -q '## Modes: synchronous vs asynchronous' "$tmp/modes/report.md" || fail "modes: no modes table"
grep -q '| SSP K=0 |' "$tmp/modes/report.md" || fail "modes: no SSP K=0 row"
# Strong scaling splits the global batch over the workers of an asynchronous run.
lst=$("$sweep" --dry-run --scaling strong --batch-sizes 64 --ranks 3 --modes async --bin "$fake" \
  --out "$tmp/dry" 2>&1)
grep -q -- '--batch-size 32 .*--mode async' <<<"$lst" || fail "strong async: per-worker batch should be 32"
"$sweep" --dry-run --scaling strong --batch-sizes 64 --ranks 3 --modes sync --out "$tmp/x" >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "strong sync: 64 over 3 ranks must be refused"
for bad in "--modes ssp" "--modes sync,bsp" "--servers 0"; do
  # shellcheck disable=SC2086
  "$sweep" $bad --out "$tmp/x" >/dev/null 2>&1
  [[ $? -eq 2 ]] || fail "sweep.sh $bad should exit 2"
done

# 9. --opt=value, an option value that starts with '-', and JSON that survives any
#    character in the recorded flags (quotes, backslashes, tabs, control characters).
lst=$("$sweep" --dry-run --batch-sizes=16,32 --ranks=2 --mpirun-arg --oversubscribe --bin="$fake" \
  --out="$tmp/dry" 2>&1)
[[ $(grep -c '^\[' <<<"$lst") -eq 2 ]] || fail "--opt=value: expected 2 runs: $lst"
grep -q -- "--mpirun-arg --oversubscribe -- train" <<<"$lst" || fail "--mpirun-arg --oversubscribe lost: $lst"
"$sweep" --ranks=1 --bin "$fake" --out "$tmp/odd" --no-report -- --tag $'a "b" \\c\td\x01' \
  --max-steps 3 >"$tmp/log9" 2>&1 || fail "odd-flag sweep failed: $(tail -3 "$tmp/log9")"
py_check 'import json, sys
m = json.load(open(sys.argv[1] + "/odd/sweep.json"))
r = json.load(open(sys.argv[1] + "/odd/b64-np1-ppn1-ring-ckptoff-r1/sweep-run.json"))
sys.exit(0 if "a \"b\" \\c\td\x01" in m["train_extra"] and r["status"] == "ok" else 1)' \
  "sweep.json must hold the extra flags verbatim"

# 10. SIGTERM to the sweep: passed to the running launcher, the run recorded as
#     interrupted, no further run started, exit 130.
: >"$tmp/args.jsonl"
FAKE_RINGTRAIN_SLEEP=30 "$sweep" --batch-sizes 16,32 --bin "$fake" --out "$tmp/int" --no-report \
  >"$tmp/log10" 2>&1 &
pid=$!
for _ in $(seq 100); do [[ -s $tmp/args.jsonl ]] && break; sleep 0.1; done
sleep 0.5
kill -TERM "$pid"
wait "$pid"
rc=$?
[[ $rc -eq 130 ]] || fail "an interrupted sweep exits 130, got $rc: $(cat "$tmp/log10")"
grep -q '"status": "interrupted"' "$tmp/int/b16-np1-ppn1-ring-ckptoff-r1/sweep-run.json" 2>/dev/null ||
  fail "the running run should be recorded as interrupted"
[[ ! -e $tmp/int/b32-np1-ppn1-ring-ckptoff-r1 ]] || fail "no run may start after the interrupt"

finish test_sweep_fake "$tmp/log1"
