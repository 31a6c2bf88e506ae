#!/usr/bin/env bash
# A resume that only the next node's copy of a snapshot makes possible, on 2 emulated nodes
# (cluster.sh: each node its own /dev/shm; root): lenet5 --logical-shards 2 at np 2 with a
# RAM snapshot every 5 steps is stopped mid-epoch (SIGTERM -> exit 75, snapshots kept). A
# node sends its snapshot whole only when the next node's own snapshot of that step holds
# other state (SnapshotWriter.h, "Replication"; otherwise that one is the copy), so node 1's
# leader alters its own snapshots (the test hook RINGTRAIN_TEST_SNAPSHOT_ALTER_NODE=1): node 0
# must find them different and send its own whole over the emulated link. Node 0 then fails
# (cluster.sh fail-node wipes its RAM: its own snapshots and its copies of node 1's) and
# answers again empty; node 1's own (altered) snapshots are deleted as well, so the only
# complete state left anywhere is node 1's copy of node 0's snapshots (from-node-0/). The
# relaunch at np 2 with --resume auto (no hook) must resume from that copy (read by rank 1
# and broadcast to rank 0, whose node holds nothing) and end bit-identical to an
# uninterrupted 1-rank run. Also: the nodes' RAM directories exist while the cluster is up
# and `cluster.sh down` removes them. Skips (exit 77) without root or network namespaces.
#   usage: test_snapshot_peer_cluster.sh RINGTRAIN_BINARY
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
bin=$1
cluster=$here/../../scripts/mpirun/cluster.sh

# Cluster ids 150..199, apart from test_elastic_cluster.sh's 200..249 (ctest -j runs both).
cluster_test_setup 150 199 "network and mount namespaces (cluster.sh); run as root to test it" ip tc unshare mount mpirun
shm0=/dev/shm/ringtrain-cluster$RINGTRAIN_CLUSTER_ID-node0
shm1=/dev/shm/ringtrain-cluster$RINGTRAIN_CLUSTER_ID-node1
trap '"$cluster" down >/dev/null 2>&1; rm -rf "$tmp"' EXIT
"$cluster" up --nodes 2 >"$tmp/up.log" 2>&1 || { cat "$tmp/up.log"; skip "cluster.sh up failed (see above)"; }
[[ -d $shm0 && -d $shm1 ]] || fail "cluster.sh up made no RAM directories $shm0, $shm1"

# 100 steps of 2 shards x batch 4; no checkpoint survives (its own directory, removed).
train=(train --model lenet5 --dataset synthetic --synthetic-shape 1x28x28 --synthetic-train 800
  --synthetic-test 16 --epochs 1 --batch-size 4 --logical-shards 2 --threads 1 --eval-every 0
  --no-tensorboard --quiet --snapshot-every 5 --log-every 1 --progress plain)
run=$tmp/run
# exec: the SIGTERM below must reach run.sh (cluster.sh run execs it), not a subshell.
# --alter: node 1's snapshots differ from node 0's (the test hook).
launch() {
  local env=()
  [[ ${1:-} == --alter ]] && { env=(--env RINGTRAIN_TEST_SNAPSHOT_ALTER_NODE=1); shift; }
  exec "$cluster" run --nodes 2 -np 2 --bin "$bin" "${env[@]}" -- "${train[@]}" --run-dir "$run" \
    --checkpoint-dir "$tmp/ck" "$@"
}
launch --alter >"$tmp/first.out" 2>&1 &
pid=$!
step=$(wait_for_step "$pid" "$run/rank-0.jsonl" 12 600)
kill -TERM "$pid" 2>/dev/null
wait "$pid"
rc=$?
[[ $rc -eq 75 ]] || { cat "$tmp/first.out"; fail "the first launch exited $rc, expected 75 (stopped by SIGTERM at step ${step:-0})"; }
rm -rf "$tmp/ck"

# Each node sees only its own RAM: node 0's files are in its directory, not in node 1's.
own0=$(ls "$shm0"/ringtrain-*/node-0-of-2/snap-*.rtck 2>/dev/null | wc -l)
copies1=$(ls "$shm1"/ringtrain-*/node-1-of-2/from-node-0/snap-*.rtck 2>/dev/null)
[[ $own0 -ge 1 && -n $copies1 ]] || fail "after the stop: $own0 own snapshot(s) on node 0, node 1's copies: '${copies1}'"
[[ -z $(ls -d "$shm1"/ringtrain-*/node-0-of-2 2>/dev/null) ]] || fail "node 1's /dev/shm holds node 0's directory"
newest=$(basename "$(echo "$copies1" | sort | tail -n 1)")

"$cluster" fail-node 0 >"$tmp/fail.log" 2>&1 || fail "cluster.sh fail-node 0: $(cat "$tmp/fail.log")"
[[ -z $(ls -A "$shm0") ]] || fail "fail-node 0 left files in $shm0: $(ls -A "$shm0")"
"$cluster" revive-node 0 >/dev/null
rm -f "$shm1"/ringtrain-*/node-1-of-2/snap-*.rtck

(launch --resume auto) >"$tmp/second.out" 2>&1
rc=$?
[[ $rc -eq 0 ]] || { cat "$tmp/second.out"; fail "the relaunch exited $rc"; }
grep -q "resumed from snapshot /dev/shm/ringtrain-.*/node-1-of-2/from-node-0/$newest (read by rank 1)" "$tmp/second.out" ||
  fail "the relaunch did not resume from node 1's copy $newest of node 0's snapshot: $(grep -h 'resume\|fresh' "$tmp/second.out")"

OMP_NUM_THREADS=1 "$bin" "${train[@]}" --run-dir "$tmp/ref" >"$tmp/ref.log" 2>&1 || fail "the 1-rank run failed: $(cat "$tmp/ref.log")"
same_final_state "$bin" "$run/model.rtck" "$tmp/ref/model.rtck" 100 "resumed run"

"$cluster" down >/dev/null 2>&1 || fail "cluster.sh down failed"
[[ ! -e $shm0 && ! -e $shm1 ]] || fail "cluster.sh down left $(ls -d "$shm0" "$shm1" 2>/dev/null | paste -sd' ')"
finish test_snapshot_peer_cluster
