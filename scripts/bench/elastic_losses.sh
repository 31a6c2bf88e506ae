#!/usr/bin/env bash
# Issue 23's elastic scenario on 4 emulated nodes (cluster.sh; root): lenet5, one rank per
# node, --logical-shards 12, a RAM snapshot every 10 steps, under run.sh --elastic
# --min-np 2 --max-np 4. Node 1 dies mid-epoch (4 -> 3 ranks); once the job runs again,
# node 1 answers again; 30 steps later node 2 dies, and the relaunch takes node 1 back.
# Prints the membership log and whether the final parameters, buffers and optimizer state
# equal an uninterrupted 1-rank run's bit for bit.
#   usage: scripts/bench/elastic_losses.sh [RINGTRAIN_BINARY]   (default build/apps/ringtrain)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
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
wait_step() { # wait until the newest rank-0 log line's step >= $1
  for _ in $(seq 3000); do
    s=$(grep -o '"type":"step","t":[0-9.e+-]*,"epoch":1,"step":[0-9]*' "$run/rank-0.jsonl" 2>/dev/null | tail -n 1 | sed 's/.*"step"://')
    ((${s:-0} >= $1)) && { echo "at step $s"; return 0; }
    sleep 0.05
  done; return 1; }
wait_step 35; date +%T.%N; "$cluster" fail-node 1
for _ in $(seq 600); do grep -q '"type": "restart"' "$run/membership.jsonl" 2>/dev/null && break; sleep 0.05; done
"$cluster" revive-node 1
sleep 3; s=$(grep -o '"type":"step","t":[0-9.e+-]*,"epoch":1,"step":[0-9]*' "$run/rank-0.jsonl" | tail -n 1 | sed 's/.*"step"://')
wait_step $((s + 30)); date +%T.%N; "$cluster" fail-node 2
wait $pid; echo "elastic exit $?"
OMP_NUM_THREADS=1 "$bin" "${train[@]}" --run-dir "$tmp/ref" > $tmp/ref.log 2>&1 || { echo ref failed; cat $tmp/ref.log; }
floats() { "$bin" inspect "$1" | /usr/bin/python3 -c 'import json, sys
d = json.load(sys.stdin); s = d["sections"]
print(d["global_step"], s["params_floats"] + s["buffers_floats"] + s["optimizer_floats"])'; }
read -r steps n < <(floats "$run/model.rtck"); read -r rs rn < <(floats "$tmp/ref/model.rtck")
echo "steps $steps/$rs floats $n/$rn"
cmp <(tail -c $((4 * n)) "$run/model.rtck") <(tail -c $((4 * n)) "$tmp/ref/model.rtck") && echo "BIT-IDENTICAL to the 1-rank run"
cat "$run/membership.jsonl"
PYTHONPATH=$root/scripts/plot /usr/bin/python3 -c 'import json, sys, rundata
s = rundata.Run(sys.argv[1]).summary_file or {}
print(json.dumps(s.get("membership")), json.dumps(s.get("resumed_from")))' "$run"
