#!/usr/bin/env bash
# psmodel's measurement slot (16:00-16:12): ring,ps at LAYOUTs, MTU 1500, 1 Gbit, burst 128kb, delay 0,
# the bench command of scripts/bench/sim_fidelity.sh with --algo ring,ps. Usage: measure.sh OUTDIR LAYOUT...
set -euo pipefail
out=$1; shift
root=/work/wt-psmodel
cluster=$root/scripts/mpirun/cluster.sh
bench=$root/build/apps/allreduce_bench
export RINGTRAIN_CLUSTER_ID=32
source /work/tools/env.sh
mkdir -p "$out"
deadline=${DEADLINE:-16:07:30}   # no layout starts after this (UTC): the slot ends 16:12
for layout in "$@"; do
  nodes=${layout%x*} per_node=${layout#*x}
  if [[ $(date -u +%H:%M:%S) > $deadline ]]; then echo "== $layout skipped: past $deadline"; continue; fi
  echo "== $layout $(date -u +%H:%M:%S) load: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$cluster" up --nodes "$nodes" --slots "$per_node" --link-rate 1gbit --burst 128kb --mtu 1500 --delay 0
  trap '"$cluster" down >/dev/null 2>&1 || true' EXIT
  "$cluster" run --np $((nodes * per_node)) --map-by slot -- "$bench" --algo ring,ps \
    --sizes 64K,256K,1M,4M,16M,64M --warmup 1 --iters 3 --repeats 3 --csv "$out/$layout-0.csv"
  "$cluster" down
  trap - EXIT
  echo "== $layout done $(date -u +%H:%M:%S) load: $(cut -d' ' -f1-3 /proc/loadavg)"
done
