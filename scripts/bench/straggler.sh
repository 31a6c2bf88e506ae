#!/usr/bin/env bash
# The straggler benchmark of issue 12: one worker slowed (--straggler-ms: the last rank sleeps
# after each gradient), sync ps against async (and SSP K=0) on the emulated cluster, 1 server +
# 2 workers. Runs a sweep.sh preset with the modes interleaved per repeat, then prints and
# writes DIR/straggler.md: each repeat's steps/s per worker and the ratio async / sync ps (and
# async / SSP K=0) of that repeat, with `uptime` before and after.
#
# usage: straggler.sh [--out DIR] [--repeats R] [--straggler-ms MS] [--model M] [--epochs E]
#                     [--launcher "CMD ARGS"] [--ppn P] [--bin PATH] [-- extra train flags]
#   The default launcher is the emulated cluster (scripts/mpirun/cluster.sh run --nodes 3
#   --link-rate 1gbit), which must be up: scripts/mpirun/cluster.sh up --nodes 3 --link-rate 1gbit;
#   one rank per node (--ppn 1; --launcher scripts/mpirun/run.sh --ppn 3: all on this host).
#   Timed runs on a shared machine: hold the bench lock, e.g.
#     flock /work/bench.lock scripts/bench/straggler.sh --out bench/straggler
# Exit status: 0 if every run succeeded, 1 otherwise, 2 for a usage error.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out=straggler-$(date +%Y%m%d-%H%M%S)
repeats=3
straggler_ms=20
model=lenet5
epochs=1
launcher="$root/scripts/mpirun/cluster.sh run --nodes 3 --link-rate 1gbit"
bin_opt=()
ppn=1
extra=()

die_usage() {
  echo "straggler.sh: error: $*" >&2
  exit 2
}

while [[ $# -gt 0 ]]; do
  case $1 in
    --out) [[ $# -ge 2 ]] || die_usage "--out needs a value"; out=$2; shift 2 ;;
    --repeats) [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || die_usage "--repeats wants a positive integer"
      repeats=$2; shift 2 ;;
    --straggler-ms) [[ $# -ge 2 && $2 =~ ^[0-9]+([.][0-9]+)?$ ]] || die_usage "--straggler-ms wants milliseconds"
      straggler_ms=$2; shift 2 ;;
    --model) [[ $# -ge 2 ]] || die_usage "--model needs a value"; model=$2; shift 2 ;;
    --epochs) [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || die_usage "--epochs wants a positive integer"
      epochs=$2; shift 2 ;;
    --launcher) [[ $# -ge 2 ]] || die_usage "--launcher needs a value"; launcher=$2; shift 2 ;;
    --ppn) [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || die_usage "--ppn wants a positive integer"
      ppn=$2; shift 2 ;;
    --bin) [[ $# -ge 2 ]] || die_usage "--bin needs a value"; bin_opt=(--bin "$2"); shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) die_usage "unknown option '$1'" ;;
  esac
done

load_before=$(uptime)
rc=0
"$root/scripts/mpirun/sweep.sh" --launcher "$launcher" --ranks 3 --ppn "$ppn" --threads 1 "${bin_opt[@]}" \
  --model "$model" --epochs "$epochs" --modes sync,ssp0,async --allreduce ps --repeats "$repeats" \
  --interleave --timeout 900 --out "$out" -- --straggler-ms "$straggler_ms" "${extra[@]}" || rc=$?
load_after=$(uptime)

/usr/bin/python3 "$root/scripts/plot/straggler_report.py" "$out" "$straggler_ms" "$load_before" "$load_after"
exit "$rc"
