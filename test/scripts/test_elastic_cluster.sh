#!/usr/bin/env bash
# End-to-end elastic kill test on emulated nodes (cluster.sh: network namespaces, root):
# lenet5 with --logical-shards 6 under `run.sh --elastic --min-np 2 --max-np 3` on 3 nodes x
# 1 rank; mid-epoch every process of node 1 gets SIGKILL and the node stops answering
# (cluster.sh fail-node); the job must finish by itself on the 2 others, resumed from a RAM
# snapshot (--snapshot-every), with parameters,
# buffers and optimizer state bit-identical to an uninterrupted 1-rank run with S = 6, and
# membership.jsonl / summary.json must say so. The elastic job reads its network from an ONNX
# file (lenet5 exported by `ringtrain export`, --init: the zoo's initial weights), the reference
# is the zoo's lenet5: a graph read from a file relaunches like a zoo model (the snapshot carries
# it) and computes the same bits. Skips (exit 77) where namespaces are not allowed.
#   usage: test_elastic_cluster.sh RINGTRAIN_BINARY
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
bin=$1
cluster=$here/../../scripts/mpirun/cluster.sh

# A cluster id of our own (others may be up: RINGTRAIN_CLUSTER_ID names them apart).
cluster_test_setup 200 249 "network namespaces (cluster.sh); run as root to test run.sh --elastic end to end" ip tc unshare mpirun
trap '"$cluster" down >/dev/null 2>&1; rm -rf "$tmp"' EXIT
"$cluster" up --nodes 3 >"$tmp/up.log" 2>&1 || { cat "$tmp/up.log"; skip "cluster.sh up failed (see above)"; }

# 100 steps of 6 shards x batch 4 in one epoch, a RAM snapshot every 10 (no checkpoints: the
# relaunch must resume from a snapshot), every step logged.
train=(train --dataset synthetic --synthetic-shape 1x28x28 --synthetic-train 2400
  --synthetic-test 48 --epochs 1 --batch-size 4 --logical-shards 6 --threads 1 --eval-every 0
  --no-tensorboard --quiet --snapshot-every 10 --log-every 1 --progress plain)
OMP_NUM_THREADS=1 "$bin" train --model lenet5 --dataset synthetic --synthetic-train 2 --synthetic-test 2 --batch-size 2 \
  --max-steps 1 --eval-every 0 --no-tensorboard --quiet --run-dir "$tmp/export" >"$tmp/export.log" 2>&1 &&
  "$bin" export --checkpoint "$tmp/export/model.rtck" --onnx "$tmp/lenet5.onnx" >>"$tmp/export.log" 2>&1 ||
  fail "exporting lenet5: $(cat "$tmp/export.log")"
run=$tmp/elastic
"$cluster" run --nodes 3 --elastic --min-np 2 --max-np 3 --bin "$bin" -- "${train[@]}" --model-file "$tmp/lenet5.onnx" \
  --init --run-dir "$run" \
  >"$tmp/elastic.out" 2>"$tmp/elastic.err" &
pid=$!
# Node 1 dies once rank 0 has logged step 25 (after two checkpoints, mid-epoch).
step=$(wait_for_step "$pid" "$run/rank-0.jsonl" 25 1200)
((${step:-0} >= 25)) || fail "the elastic run never reached step 25 (at ${step:-0})"
"$cluster" fail-node 1 >"$tmp/fail.log" 2>&1 || fail "cluster.sh fail-node 1: $(cat "$tmp/fail.log")"
# Finishing takes ~10 s here; a hang is a failure, not a wait for ctest's timeout.
for _ in $(seq 900); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
  fail "the elastic run did not end 90 s after the failure"
  kill -TERM "$pid"
fi
wait "$pid"
rc=$?
[[ $rc -eq 0 ]] || fail "run.sh --elastic exited $rc, expected 0"

# The reference: one rank, no failure (S = 6 makes every rank count that divides it equal).
OMP_NUM_THREADS=1 "$bin" "${train[@]}" --model lenet5 --run-dir "$tmp/ref" >"$tmp/ref.log" 2>&1 || fail "the 1-rank run failed: $(cat "$tmp/ref.log")"
same_final_state "$bin" "$run/model.rtck" "$tmp/ref/model.rtck" 100 "elastic run"

/usr/bin/python3 - "$run" <<'PY' || fail "membership records (above)"
import json, os, sys
d = sys.argv[1]
m = [json.loads(l) for l in open(os.path.join(d, "membership.jsonl"))]
s = json.load(open(os.path.join(d, "summary.json")))
r = [x for x in m if x["type"] == "restart"]
ok = (len(r) == 1 and r[0]["hosts_out"] == ["rt%s-node1" % os.environ["RINGTRAIN_CLUSTER_ID"]]
      and r[0]["np_before"] == 3 and r[0]["np_after"] == 2 and r[0]["resumed_from_step"] >= 20
      and 0 <= r[0]["steps_replayed"] <= 10 and r[0]["seconds_lost"] > 0
      and s["world_size"] == 2 and s["membership"]["restarts"] == 1 and s["membership"]["np_final"] == 2
      and s.get("resumed_from", {}).get("kind") == "snapshot"
      and s["resumed_from"]["step"] == r[0]["resumed_from_step"])
print("resumed from:", json.dumps(s.get("resumed_from")))
print("restart:", json.dumps(r[0] if r else None))
sys.exit(0 if ok else 1)
PY
((fails)) && { echo "--- run.sh stderr"; tail -n 40 "$tmp/elastic.err"; }
finish test_elastic_cluster
