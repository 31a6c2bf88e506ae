#!/usr/bin/env bash
# Tests run.sh --elastic's decisions on one host without namespaces: mpirun is a fake
# (fake_elastic_mpirun.py: each launch follows a line of a plan: steps trained, nodes lost or
# back, exit status) and the plm_rsh_agent a script that says whether a fake host answers.
# Checked: which hosts and rank count each relaunch gets, --resume auto, the user's hostfile
# untouched, membership.jsonl and summary.json's `membership`, and the cases that must not
# relaunch (exit 2, SIGTERM to run.sh, too few ranks, no progress, --max-restarts), usage errors.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
run=$here/../../scripts/mpirun/run.sh
export FAKE_ELASTIC_DIR=$tmp/state
printf '# three nodes\na slots=1\nb slots=1\nc slots=1\n' >"$tmp/hosts"
cp "$tmp/hosts" "$tmp/hosts.orig"

# elastic PLAN_LINES... -- RUN.SH ARGS... : a fresh state and run dir, run.sh --elastic with the
# fake mpirun and agent; status in $rc, stderr in $tmp/err.
elastic() {
  rm -rf "$FAKE_ELASTIC_DIR" "$tmp/run"
  mkdir -p "$FAKE_ELASTIC_DIR"
  : >"$FAKE_ELASTIC_DIR/plan"
  while [[ $1 != -- ]]; do echo "$1" >>"$FAKE_ELASTIC_DIR/plan"; shift; done
  shift
  "$run" --elastic --hostfile "$tmp/hosts" --mpirun "$here/fake_elastic_mpirun.py" --bin /bin/true \
    --mca plm_rsh_agent "$here/fake_agent.sh" --cores-per-node 4 --probe-timeout 5 "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}
launches() { ls "$FAKE_ELASTIC_DIR" | grep -c '^argv-'; }
hosts_of() { grep -v '^#' "$FAKE_ELASTIC_DIR/hosts-$1" | awk '{print $1}' | paste -sd, -; }
# jq-free JSON checks: py EXPR evaluates a Python expression over m (membership.jsonl's
# records) and s (summary.json, or None); it must be true.
py() {
  /usr/bin/python3 - "$tmp/run" "$1" <<'PY' || fail "expected: $1 (membership: $(cat "$tmp/run/membership.jsonl" 2>/dev/null))"
import json, os, sys
d, expr = sys.argv[1], sys.argv[2]
m = [json.loads(l) for l in open(os.path.join(d, "membership.jsonl"))]
s = json.load(open(os.path.join(d, "summary.json"))) if os.path.exists(os.path.join(d, "summary.json")) else None
sys.exit(0 if eval(expr) else 1)
PY
}
train=(train --model lenet5 --logical-shards 6 --run-dir "$tmp/run" --checkpoint-every-steps 10)

# 1. Node b is lost in launch 1 (steps 1-25): launch 2 runs on a, c at np 2 (the largest
#    that divides 6 and fits) with --resume auto, from step 21 (4 steps replayed) and finishes.
elastic "steps=1-25 down=b exit=137" "steps=21-40 summary" -- --min-np 2 --max-np 3 -- "${train[@]}"
[[ $rc -eq 0 ]] || fail "1: exit $rc, expected 0: $(cat "$tmp/err")"
[[ $(launches) -eq 2 ]] || fail "1: $(launches) launches, expected 2"
[[ $(hosts_of 1) == a,b,c && $(hosts_of 2) == a,c ]] || fail "1: hosts $(hosts_of 1) then $(hosts_of 2)"
grep -q -- '-np 3 ' "$FAKE_ELASTIC_DIR/argv-1" || fail "1: launch 1 not at -np 3: $(cat "$FAKE_ELASTIC_DIR/argv-1")"
grep -q -- '-np 2 ' "$FAKE_ELASTIC_DIR/argv-2" || fail "1: launch 2 not at -np 2"
grep -q -- '--resume' "$FAKE_ELASTIC_DIR/argv-1" && fail "1: launch 1 must not get --resume"
grep -q -- "--run-dir $tmp/run --checkpoint-every-steps 10 --resume auto$" "$FAKE_ELASTIC_DIR/argv-2" ||
  fail "1: launch 2 must end with --resume auto: $(cat "$FAKE_ELASTIC_DIR/argv-2")"
cmp -s "$tmp/hosts" "$tmp/hosts.orig" || fail "1: the user's hostfile was changed"
[[ -f $tmp/run/elastic-hostfile ]] || fail "1: no <run-dir>/elastic-hostfile"
py "[r['type'] for r in m] == ['start', 'restart', 'end']"
py "m[0]['np'] == 3 and m[0]['hosts'] == ['a', 'b', 'c']"
py "m[1]['hosts_out'] == ['b'] and m[1]['hosts_in'] == [] and m[1]['np_before'] == 3 and m[1]['np_after'] == 2"
py "m[1]['exit_status'] == 137 and m[1]['failed_step'] == 25 and m[1]['resumed_from_step'] == 20"
py "m[1]['steps_replayed'] == 5 and m[1]['seconds_lost'] is not None and m[1]['first_step_at'] >= m[1]['failed_at']"
py "m[2]['exit_status'] == 0 and m[2]['launches'] == 2"
py "s['membership']['restarts'] == 1 and s['membership']['np_final'] == 2 and s['membership']['steps_replayed'] == 5"
py "s['membership']['hosts_final'] == ['a', 'c'] and s['membership']['changes'][0]['hosts_out'] == ['b'] and s['model'] == 'fake'"
grep -q "no --logical-shards" "$tmp/err" && fail "1: the no-shards note with --logical-shards"

# 2. Two losses (3 -> 2 -> 1 at S = 6 needs p in {1, 2, 3, 6}); b back at the third restart:
#    np 2 on a, b (the largest p dividing 6 that fits 2 hosts).
elastic "steps=1-10 down=b exit=1" "steps=9-15 down=c exit=137" "steps=14-20 up=b exit=137" "steps=19-30 summary" \
  -- --min-np 1 -- "${train[@]}"
[[ $rc -eq 0 ]] || fail "2: exit $rc: $(cat "$tmp/err")"
[[ $(hosts_of 2) == a,c && $(hosts_of 3) == a && $(hosts_of 4) == a,b ]] ||
  fail "2: hosts $(hosts_of 2) / $(hosts_of 3) / $(hosts_of 4)"
py "[r.get('np_after') for r in m if r['type'] == 'restart'] == [2, 1, 2]"
py "m[3]['hosts_in'] == ['b'] and m[3]['hosts_out'] == []"
py "s['membership']['restarts'] == 3 and s['membership']['steps_replayed'] == 2 + 2 + 2"

# 2b. A stall timeout ends launch 1: the launcher's message and the restart record name the
#     stalled rank and its host, and the ranks' stderr still reaches the launcher's.
elastic "steps=1-10 stall=1@b exit=1" "steps=9-20 summary" -- --min-np 2 -- "${train[@]}"
[[ $rc -eq 0 ]] || fail "2b: exit $rc: $(cat "$tmp/err")"
grep -q "^run.sh: elastic: launch 1 ended with exit status 1 after a stall timeout; stalled rank(s): rank 1 on b \[silent for 3.1 s; last seen: step 9, evaluation" "$tmp/err" ||
  fail "2b: the launcher did not name the stalled rank: $(cat "$tmp/err")"
grep -q "^ringtrain: \[rank 0\] error: stall timeout" "$tmp/err" || fail "2b: the rank's error did not pass through"
py "m[1]['stalled'] == [{'rank': 1, 'host': 'b'}]"

# 3. A usage error (exit 2) is not retried.
elastic "exit=2" -- -- "${train[@]}"
[[ $rc -eq 2 && $(launches) -eq 1 ]] || fail "3: exit $rc after $(launches) launch(es), expected 2 after 1"
grep -q "usage error" "$tmp/err" || fail "3: no word on why: $(cat "$tmp/err")"

# 4. SIGTERM (or SIGINT, a Ctrl-C) to run.sh: passed to the launch (mpirun gets SIGUSR2, the
#    ranks checkpoint and exit 75), nothing relaunched, exit 75.
for sig in TERM INT; do
  rm -rf "$FAKE_ELASTIC_DIR" "$tmp/run"; mkdir -p "$FAKE_ELASTIC_DIR"
  printf 'steps=1-5 wait\nsteps=5-9 summary\n' >"$FAKE_ELASTIC_DIR/plan"
  "$run" --elastic --hostfile "$tmp/hosts" --mpirun "$here/fake_elastic_mpirun.py" --bin /bin/true \
    --mca plm_rsh_agent "$here/fake_agent.sh" -- "${train[@]}" >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  for _ in $(seq 200); do [[ -e $FAKE_ELASTIC_DIR/waiting ]] && break; sleep 0.05; done
  [[ -e $FAKE_ELASTIC_DIR/waiting ]] || fail "4: the fake launch never started"
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  [[ $rc -eq 75 && $(launches) -eq 1 ]] ||
    fail "4: SIG$sig: exit $rc after $(launches) launch(es), expected 75 after 1: $(cat "$tmp/err")"
done

# 5. Fewer than --min-np ranks left: a clear refusal, the failed launch's status.
elastic "steps=1-5 down=b,c exit=137" -- --min-np 2 -- "${train[@]}"
[[ $rc -eq 137 && $(launches) -eq 1 ]] || fail "5: exit $rc after $(launches) launch(es), expected 137 after 1"
grep -q "below\|no rank count from --min-np 2" "$tmp/err" || fail "5: no refusal naming --min-np: $(cat "$tmp/err")"
py "m[-1]['type'] == 'end' and m[-1]['exit_status'] == 137"

# 6. No progress: a relaunch that fails before its first step with the same hosts is not
#    repeated; and --max-restarts caps relaunches that do progress.
elastic "steps=1-5 down=c exit=137" "exit=1" -- -- "${train[@]}"
[[ $rc -eq 1 && $(launches) -eq 2 ]] || fail "6: exit $rc after $(launches) launch(es), expected 1 after 2"
grep -q "before its first step" "$tmp/err" || fail "6: no word on the lack of progress: $(cat "$tmp/err")"
py "m[1]['type'] == 'restart' and m[1]['resumed_from_step'] is None"
elastic "steps=1-5 exit=1" "steps=5-9 exit=1" "steps=9-12 exit=1" "summary" -- --max-restarts 2 -- "${train[@]}"
[[ $rc -eq 1 && $(launches) -eq 3 ]] || fail "6: exit $rc after $(launches) launch(es), expected 1 after 3 (--max-restarts 2)"

# 7. No --logical-shards: the largest count that fits (here 2 on a, c), with a note that
#    results then depend on it.
elastic "steps=1-5 down=b exit=137" "steps=5-9 summary" -- -- train --model lenet5 --run-dir "$tmp/run"
[[ $rc -eq 0 && $(hosts_of 2) == a,c ]] || fail "7: exit $rc, hosts $(hosts_of 2)"
grep -q "no --logical-shards" "$tmp/err" || fail "7: no note that results depend on the rank count"

# 7b. --run-dir and --logical-shards from train's --config (TOML, '-' or '_' keys): S = 4
#     from the file makes launch 1 np 2 on 3 hosts (np 3 would not divide it).
printf 'logical_shards = 4\nrun-dir = "%s"\n' "$tmp/run" >"$tmp/c.toml"
elastic "steps=1-5 summary" -- -- train --model lenet5 --config "$tmp/c.toml"
[[ $rc -eq 0 ]] || fail "7b: exit $rc: $(cat "$tmp/err")"
grep -q -- '-np 2 ' "$FAKE_ELASTIC_DIR/argv-1" || fail "7b: launch 1 not at -np 2: $(cat "$FAKE_ELASTIC_DIR/argv-1")"
grep -q "no --logical-shards" "$tmp/err" && fail "7b: --logical-shards in --config not seen"
py "m[0]['np'] == 2 and m[0]['logical_shards'] == 4"

# 8. Usage errors: exit 2 with one line naming the flag, nothing launched.
expect_usage() {
  rm -rf "$FAKE_ELASTIC_DIR"; mkdir -p "$FAKE_ELASTIC_DIR"; : >"$FAKE_ELASTIC_DIR/plan"
  "$run" --mpirun "$here/fake_elastic_mpirun.py" --bin /bin/true "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  [[ $got -eq 2 ]] || fail "8: run.sh $* exited $got, expected 2"
  grep -q "error" "$tmp/err" || fail "8: run.sh $*: no message: $(cat "$tmp/err")"
  [[ $(launches) -eq 0 ]] || fail "8: run.sh $* launched"
}
expect_usage --elastic -np 2 --hostfile "$tmp/hosts" -- "${train[@]}"
expect_usage --elastic -- "${train[@]}"
expect_usage --elastic --hostfile "$tmp/hosts" -- train --model lenet5
expect_usage --elastic --hostfile "$tmp/hosts" --min-np 3 --max-np 2 -- "${train[@]}"
expect_usage --elastic --hostfile "$tmp/hosts" --min-np 4 -- "${train[@]}"
expect_usage --elastic --hostfile "$tmp/hosts" --min-np 0 -- "${train[@]}"
expect_usage --min-np 2 --hostfile "$tmp/hosts" -- "${train[@]}"
expect_usage --elastic --hostfile "$tmp/hosts" -- eval --checkpoint x
expect_usage --elastic --hostfile "$tmp/hosts" -- "${train[@]}" --mode async
printf 'mode = "async"\n' >"$tmp/async.toml"
expect_usage --elastic --hostfile "$tmp/hosts" -- "${train[@]}" --config "$tmp/async.toml"
printf 'run-dir: %s\n' "$tmp/run" >"$tmp/c.ini"
expect_usage --elastic --hostfile "$tmp/hosts" -- train --model lenet5 --config "$tmp/c.ini"
grep -q "config $tmp/c.ini" "$tmp/err" || fail "8: the INI --config not named: $(cat "$tmp/err")"
expect_usage --elastic --hostfile "$tmp/hosts" -- train --model lenet5 --config "$tmp/missing.toml"

finish test_elastic
