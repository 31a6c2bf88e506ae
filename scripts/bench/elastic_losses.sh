#!/usr/bin/env bash
# Issue 23's elastic scenario on 4 emulated nodes (cluster.sh; root): lenet5, one rank per
# node, --logical-shards 12, a RAM snapshot every 10 steps, under run.sh --elastic
# --min-np 2 --max-np 4. Node 1 dies mid-epoch (4 -> 3 ranks); once the job runs again,
# node 1 answers again; 30 steps later node 2 dies, and the relaunch takes node 1 back
# (3 -> 3). With --no-revive node 1 stays down, so the second loss leaves 2 nodes
# (4 -> 3 -> 2). Every emulated node has its own /dev/shm and a failed node's is wiped
# (cluster.sh), so each relaunch resumes from snapshots on the surviving nodes only.
# Prints, per loss: the step rank 0 had logged when the node was failed, the last step the
# failed launch logged, the step resumed from, the steps replayed, and the seconds from the
# kill to the first step on the survivors; then the membership log and whether the final
# parameters, buffers and optimizer state equal an uninterrupted 1-rank run's bit for bit.
#   usage: scripts/bench/elastic_losses.sh [--no-revive] [RINGTRAIN_BINARY]
#          (default binary build/apps/ringtrain; RINGTRAIN_CLUSTER_ID, default 231, names the cluster)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
revive=1
case ${1:-} in
  --no-revive) revive=0; shift ;;
  -h|--help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "elastic_losses.sh: unknown option '$1' (--no-revive, --help)" >&2; exit 2 ;;
esac
bin=${1:-$root/build/apps/ringtrain}
cluster=$root/scripts/mpirun/cluster.sh
export RINGTRAIN_CLUSTER_ID=${RINGTRAIN_CLUSTER_ID:-231}
tmp=$(mktemp -d)
trap '"$cluster" down >/dev/null 2>&1; rm -rf "$tmp"' EXIT
"$cluster" up --nodes 4 > $tmp/up.log 2>&1 || { cat $tmp/up.log; exit 1; }
train=(train --model lenet5 --dataset synthetic --synthetic-shape 1x28x28 --synthetic-train 48000
  --synthetic-test 48 --epochs 1 --batch-size 2 --logical-shards 12 --threads 1 --eval-every 0
  --no-tensorboard --quiet --snapshot-every 10 --log-every 1 --progress plain)
run=$tmp/elastic
"$cluster" run --nodes 4 --elastic --min-np 2 --max-np 4 --bin "$bin" -- "${train[@]}" --run-dir "$run" \
  > $tmp/elastic.out 2> $tmp/elastic.err &
pid=$!
last_step() { grep -o '"type":"step","t":[0-9.e+-]*,"epoch":1,"step":[0-9]*' "$run/rank-0.jsonl" 2>/dev/null | tail -n 1 | sed 's/.*"step"://'; }
wait_step() { # wait until the newest rank-0 log line's step >= $1
  for _ in $(seq 3000); do
    s=$(last_step)
    ((${s:-0} >= $1)) && return 0
    sleep 0.05
  done; return 1; }
wait_restarts() { # wait until membership.jsonl has $1 restart records
  for _ in $(seq 1200); do
    (($(grep -c '"type": "restart"' "$run/membership.jsonl" 2>/dev/null) >= $1)) && return 0
    sleep 0.05
  done; return 1; }
fail() { # fail node $1; the kill's time and rank 0's last logged step go to $tmp/kills
  local s t
  s=$(last_step); t=$(date +%s.%N)
  "$cluster" fail-node "$1"
  echo "$1 $s $t" >> $tmp/kills
}
wait_step 35; fail 1
wait_restarts 1
((revive)) && "$cluster" revive-node 1
sleep 3; wait_step $(($(last_step) + 30)); fail 2
wait $pid; echo "elastic exit $?"
OMP_NUM_THREADS=1 "$bin" "${train[@]}" --run-dir "$tmp/ref" > $tmp/ref.log 2>&1 || { echo ref failed; cat $tmp/ref.log; }
floats() { "$bin" inspect "$1" | /usr/bin/python3 -c 'import json, sys
d = json.load(sys.stdin); s = d["sections"]
print(d["global_step"], s["params_floats"] + s["buffers_floats"] + s["optimizer_floats"])'; }
read -r steps n < <(floats "$run/model.rtck"); read -r rs rn < <(floats "$tmp/ref/model.rtck")
echo "steps $steps/$rs floats $n/$rn"
cmp <(tail -c $((4 * n)) "$run/model.rtck") <(tail -c $((4 * n)) "$tmp/ref/model.rtck") && echo "BIT-IDENTICAL to the 1-rank run"
cat "$run/membership.jsonl"
grep -h "resumed from\|resume:" $tmp/elastic.out || true
PYTHONPATH=$root/scripts/plot /usr/bin/python3 - "$run" "$tmp/kills" <<'PY'
import json, os, sys, rundata
run, kills = sys.argv[1], [l.split() for l in open(sys.argv[2])]
restarts = [json.loads(l) for l in open(os.path.join(run, "membership.jsonl"))]
restarts = [r for r in restarts if r["type"] == "restart"]
print("loss  node  np     logged at kill  failed launch's last step  resumed from  replayed  kill -> first step (s)")
for i, (node, logged, t) in enumerate(kills):
    r = restarts[i] if i < len(restarts) else {}
    first = r.get("first_step_at")
    print(f"{i + 1:>4}  {node:>4}  {r.get('np_before')}->{r.get('np_after')}  {logged:>14}  {str(r.get('failed_step')):>25}  "
          f"{str(r.get('resumed_from_step')):>12}  {str(r.get('steps_replayed')):>8}  "
          f"{'-' if first is None else round(first - float(t), 2):>22}")
s = rundata.Run(run).summary_file or {}
print(json.dumps(s.get("membership", {}).get("changes") and {k: s["membership"][k] for k in ("restarts", "np_final", "hosts_final", "steps_replayed", "seconds_lost")}),
      json.dumps(s.get("resumed_from")))
PY
