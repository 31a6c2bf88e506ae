#!/usr/bin/env bash
# All-reduce comparison with apps/allreduce_bench: ring vs MPI_Allreduce vs ps vs rd vs
# auto on shared memory at np 2 and 4; with --cluster also on the emulated cluster of
# scripts/mpirun/cluster.sh (tbf-shaped links, torn down afterwards): one rank per node at
# each node count and MTU (mpi, ring, ps, rd from 1 MiB; mpi, ring, rd, ps and auto from
# 64 KiB to 4 MiB, where `auto`'s crossover lies; a plain-TCP baseline of the same links,
# scripts/bench/link_baseline.py, as the ceiling), the ring with bf16 transport against
# fp32 on 2 nodes, and hier against the flat ring, rd and MPI_Allreduce on 2 nodes x 2 ranks.
#
#   scripts/bench/allreduce.sh [--quick] [--cluster | --cluster-only] [--nodes "2 3 4"]
#                              [--mtus "9000 1500"] [--link-rate 1gbit] [--out DIR]
#                              [-- extra allreduce_bench flags]
#
# Tables go to stdout; CSV/JSON per run into --out (default build/bench/allreduce).
# Every ratio (vs_mpi) compares algorithms measured in the same run; repeats take turns
# over the algorithms and the best repeat counts, to damp noise from other processes.
# Set RINGTRAIN_CLUSTER_ID to keep the emulated cluster apart from others on the machine.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${RINGTRAIN_BUILD_DIR:-$root/build}
bench=$build/apps/allreduce_bench
quick=0
cluster=0
shm=1
nodes_list="2 3 4"
mtus="9000 1500"
link_rate=1gbit
out=$build/bench/allreduce
extra=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) quick=1; shift ;;
    --cluster) cluster=1; shift ;;
    --cluster-only) cluster=1; shm=0; shift ;;
    --nodes) nodes_list=$2; shift 2 ;;
    --mtus) mtus=$2; shift 2 ;;
    --link-rate) link_rate=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "allreduce.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -x $bench ]] || { echo "allreduce.sh: $bench not built (run scripts/build.sh)" >&2; exit 1; }
mkdir -p "$out"
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMP_NUM_THREADS=1

# Small sizes: many short calls; large sizes: few calls per repeat, more repeats.
if [[ $quick -eq 1 ]]; then
  small_args=(--min-bytes 4 --max-bytes 512K --warmup 2 --iters 10 --repeats 3)
  large_args=(--min-bytes 1M --max-bytes 16M --warmup 1 --iters 2 --repeats 3)
  net_args=(--sizes 1M,4M,16M,64M,256M --warmup 1 --iters 1 --repeats 2)
  cross_args=(--sizes 64K,256K,512K,1M,2M,4M --warmup 2 --iters 3 --repeats 3)
  bf16_args=(--sizes 16M,64M --warmup 1 --iters 2 --repeats 2)
  hier_args=(--sizes 256K,1M,16M --warmup 1 --iters 2 --repeats 2)
else
  small_args=(--min-bytes 4 --max-bytes 512K --warmup 3 --iters 20 --repeats 7)
  large_args=(--min-bytes 1M --max-bytes 256M --warmup 1 --iters 2 --repeats 7)
  net_args=(--sizes 1M,4M,16M,64M,256M --warmup 1 --iters 2 --repeats 3)
  cross_args=(--sizes 64K,256K,512K,1M,2M,4M --warmup 2 --iters 5 --repeats 5)
  bf16_args=(--sizes 16M,64M,256M --warmup 1 --iters 2 --repeats 3)
  hier_args=(--sizes 256K,1M,4M,16M,64M --warmup 1 --iters 2 --repeats 3)
fi

for np in 2 4; do
  [[ $shm -eq 1 ]] || break
  for range in small large; do
    declare -n args=${range}_args
    echo "## shared memory, np $np, $range sizes ($(date -u +%H:%M:%S) UTC, load: $(cut -d' ' -f1-3 /proc/loadavg))"
    mpirun -np "$np" --oversubscribe --bind-to none -x OMP_NUM_THREADS "$bench" --algo all \
      "${args[@]}" --csv "$out/shm_np${np}_$range.csv" --json "$out/shm_np${np}_$range.json" "${extra[@]}"
    echo
  done
done

if [[ $cluster -eq 1 ]]; then
  cluster_sh=$root/scripts/mpirun/cluster.sh
  trap '"$cluster_sh" down >/dev/null 2>&1 || true' EXIT
  # A daemon launch into the namespaces has (rarely) stalled right after `up`; check the
  # launch first with a timeout, and give each benchmark run one retry on a timeout.
  launch_ok() {
    local try
    for try in 1 2 3; do
      if timeout 60 "$cluster_sh" run --np "$1" -- hostname >/dev/null 2>&1; then return 0; fi
      echo "(launch check $try timed out or failed; retrying)" >&2
    done
    return 1
  }
  # bench_run NAME NP [cluster.sh run options --] allreduce_bench args...
  bench_run() {
    local name=$1 np=$2 attempt
    shift 2
    local -a run_opts=()
    while [[ $# -gt 0 && $1 != -- ]]; do run_opts+=("$1"); shift; done
    [[ ${1:-} == -- ]] && shift
    echo "## $name ($(date -u +%H:%M:%S) UTC, load: $(cut -d' ' -f1-3 /proc/loadavg))"
    echo "+ cluster.sh run --np $np ${run_opts[*]} -- allreduce_bench $* ${extra[*]}"
    for attempt in 1 2; do
      if timeout "${RINGTRAIN_CLUSTER_TIMEOUT:-1800}" "$cluster_sh" run --np "$np" "${run_opts[@]}" -- \
          "$bench" "$@" --csv "$out/$name.csv" --json "$out/$name.json" "${extra[@]}" | grep -v '^+ '; then
        echo
        return 0
      fi
      echo "(cluster run failed or timed out; retrying once)" >&2
    done
    echo "allreduce.sh: cluster run $name failed twice" >&2
    exit 1
  }
  # cluster_up NP up-options...: a fresh cluster, checked by launching NP ranks.
  cluster_up() {
    local np=$1
    shift
    "$cluster_sh" down >/dev/null 2>&1 || true
    "$cluster_sh" up "$@" | sed -n 1p
    launch_ok "$np" || { echo "allreduce.sh: mpirun cannot launch into the emulated cluster" >&2; exit 1; }
  }
  for mtu in $mtus; do
    for nodes in $nodes_list; do
      cluster_up "$nodes" --nodes "$nodes" --link-rate "$link_rate" --mtu "$mtu"
      echo "## link_baseline n$nodes mtu$mtu ($(date -u +%H:%M:%S) UTC, load: $(cut -d' ' -f1-3 /proc/loadavg))"
      python3 "$root/scripts/bench/link_baseline.py"
      echo
      bench_run "cluster_n${nodes}_mtu$mtu" "$nodes" -- --algo mpi,ring,ps,rd "${net_args[@]}"
      bench_run "cluster_n${nodes}_mtu${mtu}_small" "$nodes" -- --algo mpi,ring,rd,ps,auto "${cross_args[@]}"
      # 16-bit transport against fp32, same run, on the commonest setting: two nodes.
      if [[ $nodes -eq 2 ]]; then
        bench_run "cluster_n2_mtu${mtu}_bf16" 2 -- --algo ring --compress none,bf16,fp16 "${bf16_args[@]}"
      fi
    done
    # Two ranks per node: hier against the flat ring (ranks 0,1 on node 0 and 2,3 on node
    # 1, the flat ring's best placement: two of its four hops cross the network) and MPI.
    cluster_up 4 --nodes 2 --slots 2 --link-rate "$link_rate" --mtu "$mtu"
    bench_run "cluster_2x2_mtu$mtu" 4 --map-by slot -- --algo mpi,ring,hier,rd "${hier_args[@]}"
  done
  "$cluster_sh" down
fi
