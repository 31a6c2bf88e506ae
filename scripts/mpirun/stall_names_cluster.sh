#!/usr/bin/env bash
# The stall watchdog's names across emulated nodes: np 4 on 2 nodes of cluster.sh (network
# namespaces, each node its own address and host name), one rank SIGSTOPped at random
# moments (steps, metric sums, evaluation, checkpoints) per launch, one launch per rank: every
# stall message must name exactly the stopped rank and its node (test/train/
# stall_random_test.py's checks, with the ranks found in the cluster's own namespaces).
# Brings its own cluster up (RINGTRAIN_CLUSTER_ID, default 240) and down. Needs root.
#
# usage: stall_names_cluster.sh RINGTRAIN_BINARY [--stops S] [--seed X] [--async]
# Exit status: 0 if every message named the stopped rank and its node, 1 otherwise, 77 when
# namespaces cannot be made here (not root).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
[[ $# -ge 1 ]] || { echo "usage: stall_names_cluster.sh RINGTRAIN_BINARY [--stops S] [--seed X] [--async]" >&2; exit 2; }
bin=$(readlink -f "$1")
shift
[[ $(id -u) -eq 0 ]] || { echo "stall_names_cluster.sh: needs root (network namespaces); skipped" >&2; exit 77; }
export RINGTRAIN_CLUSTER_ID=${RINGTRAIN_CLUSTER_ID:-240}
cluster=$root/scripts/mpirun/cluster.sh
trap '"$cluster" down >/dev/null 2>&1' EXIT
"$cluster" up --nodes 2 --slots 2 || { echo "stall_names_cluster.sh: cluster.sh up failed" >&2; exit 77; }
# Rank 0 (the side channel's hub), a rank on the hub's node and one on the other node.
/usr/bin/python3 "$root/test/train/stall_random_test.py" "$bin" --cluster "$RINGTRAIN_CLUSTER_ID" --nodes 2 --np 4 \
  --launches 3 --stops 5 "$@"
