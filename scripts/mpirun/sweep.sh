#!/usr/bin/env bash
# Run a grid of ringtrain trainings (batch sizes x ranks x processes per node x training
# mode and all-reduce x checkpointing x repeats), one run directory each, then tabulate and
# plot them.
#
# usage: sweep.sh [options] [-- extra train flags]
#   sweep.sh --batch-sizes 32,64,128 --ranks 1,2 --epochs 3 --out sweeps/bs
#   sweep.sh --ranks 1,2,4 --batch-sizes 256 --scaling strong --out sweeps/strong -- --lr 0.1
#   sweep.sh --ranks 3 --modes sync,async,ssp2 --allreduce ring,ps --out sweeps/modes
# A failed run is recorded (status, exit code, log) and the sweep goes on; re-running the
# same command skips the runs that finished (summary.json present) and retries the rest.
set -euo pipefail

prog=sweep.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
  cat <<'EOF'
usage: sweep.sh [options] [-- extra train flags]

Grid (comma-separated lists; every combination runs)
  --batch-sizes LIST     batch sizes (default 64); per rank (weak) or global (strong)
  --ranks LIST           rank counts (default 1)
  --ppn LIST             processes per node (default: all ranks on one node, or spread
                         over the hostfile); combinations that cannot be placed are skipped
  --allreduce LIST       ring, mpi, ps, rd (default ring): the all-reduce of sync runs
  --modes LIST           sync, async, ssp<K> (default sync). sync: one run per --allreduce;
                         async: --mode async (no staleness bound); sspK: --mode async
                         --max-staleness K (ssp0 is synchronous through the servers).
                         Asynchronous runs need at least --servers + 1 ranks (others are
                         skipped) and ignore --allreduce
  --servers S            parameter-server ranks of async/ssp runs (default 1)
  --checkpoint LIST      on, off (default off)
  --scaling weak|strong  weak: per-rank batch = the batch size; strong: global batch =
                         the batch size, per-rank = batch / ranks (must divide) (default weak)
  --repeats R            repeat every combination R times (default 1)
  --interleave           run repeat 1 of every combination, then repeat 2, ...: timings
                         compared across combinations then share the background load
Training
  --model M              (default lenet5)
  --dataset D            (default fashion-mnist)
  --epochs E             (default 1)
  --checkpoint-every N   with --checkpoint on (default 1)
  -- FLAGS...            everything after -- is appended to every `ringtrain train`
Placement and launch (passed to run.sh)
  --hostfile FILE  --threads T  --bin PATH  --mca NAME VALUE  --mpirun-arg ARG
  --launcher "CMD ARGS"  launcher taking run.sh's options (default scripts/mpirun/run.sh),
                         e.g. "scripts/mpirun/cluster.sh run --nodes 3 --link-rate 1gbit"
  --timeout SEC          kill a run after SEC seconds and record it as timed out
Output
  --out DIR              sweep directory (default sweeps/<date>-<time>)
  --dry-run              list the runs and their commands, run nothing
  --no-report            do not write results.csv / report.md at the end
  --run-reports          also write each run's report.md and plots/ (run_report.py)
  -h, --help             this text

Each run lives in DIR/<name>/ (name from its parameters, e.g. b64-np2-ppn2-ring-ckptoff-r1;
an asynchronous run has its mode where a sync run has its all-reduce: b64-np3-ppn1-ssp2-...)
with the trainer's files plus launch.log (its output) and sweep-run.json (parameters,
status, exit code, wall time). At the end scripts/plot/sweep_report.py writes
DIR/results.csv, DIR/report.md and DIR/plots/. Exit status: 0 if every run succeeded,
1 if any failed, 2 for a usage error.
EOF
}

die_usage() {
  echo "$prog: error: $*" >&2
  echo "$prog: see '$prog --help'" >&2
  exit 2
}

# split_list NAME VALUE PATTERN DESCRIPTION : comma list into the array NAME, each item checked
split_list() {
  local -n arr=$1
  local value=$2 pattern=$3 what=$4 item
  IFS=, read -r -a arr <<<"$value"
  [[ ${#arr[@]} -gt 0 ]] || die_usage "empty list for $what"
  for item in "${arr[@]}"; do
    [[ $item =~ $pattern ]] || die_usage "$what: '$item' is not valid"
  done
}

json_str() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\t'/\\t}
  printf '"%s"' "$s"
}

batch_sizes=(64)
ranks=(1)
ppns=(auto)
algos=(ring)
modes=(sync)
servers=1
ckpts=(off)
scaling=weak
repeats=1
model=lenet5
dataset=fashion-mnist
epochs=1
ckpt_every=1
out=
dry_run=0
interleave=0
report=1
report_opts=()
timeout_s=
launcher=("$here/run.sh")
launch_opts=()
hostfile=
multi_node=0  # a --hostfile or another --launcher (e.g. cluster.sh run) places ranks on nodes
train_extra=()

posint='^[1-9][0-9]*$'
while [[ $# -gt 0 ]]; do
  case $1 in
    --batch-sizes) [[ $# -ge 2 ]] || die_usage "$1 needs a value"
      split_list batch_sizes "$2" "$posint" --batch-sizes; shift 2 ;;
    --ranks) [[ $# -ge 2 ]] || die_usage "$1 needs a value"
      split_list ranks "$2" "$posint" --ranks; shift 2 ;;
    --ppn) [[ $# -ge 2 ]] || die_usage "$1 needs a value"
      split_list ppns "$2" "$posint" --ppn; shift 2 ;;
    --allreduce) [[ $# -ge 2 ]] || die_usage "$1 needs a value"
      split_list algos "$2" '^(ring|mpi|ps|rd)$' --allreduce; shift 2 ;;
    --modes) [[ $# -ge 2 ]] || die_usage "$1 needs a value"
      split_list modes "$2" '^(sync|async|ssp(0|[1-9][0-9]*))$' --modes; shift 2 ;;
    --servers) [[ $# -ge 2 && $2 =~ $posint ]] || die_usage "--servers wants a positive integer"
      servers=$2; shift 2 ;;
    --checkpoint) [[ $# -ge 2 ]] || die_usage "$1 needs a value"
      split_list ckpts "$2" '^(on|off)$' --checkpoint; shift 2 ;;
    --scaling) [[ $# -ge 2 && $2 =~ ^(weak|strong)$ ]] || die_usage "--scaling wants weak or strong"
      scaling=$2; shift 2 ;;
    --repeats) [[ $# -ge 2 && $2 =~ $posint ]] || die_usage "--repeats wants a positive integer"
      repeats=$2; shift 2 ;;
    --model) [[ $# -ge 2 && -n $2 ]] || die_usage "$1 needs a value"; model=$2; shift 2 ;;
    --dataset) [[ $# -ge 2 && -n $2 ]] || die_usage "$1 needs a value"; dataset=$2; shift 2 ;;
    --epochs) [[ $# -ge 2 && $2 =~ $posint ]] || die_usage "--epochs wants a positive integer"
      epochs=$2; shift 2 ;;
    --checkpoint-every) [[ $# -ge 2 && $2 =~ $posint ]] ||
        die_usage "--checkpoint-every wants a positive integer"
      ckpt_every=$2; shift 2 ;;
    --hostfile) [[ $# -ge 2 && -n $2 ]] || die_usage "$1 needs a value"
      hostfile=$2; multi_node=1; launch_opts+=(--hostfile "$2"); shift 2 ;;
    --threads) [[ $# -ge 2 && $2 =~ $posint ]] || die_usage "--threads wants a positive integer"
      launch_opts+=(--threads "$2"); shift 2 ;;
    --bin) [[ $# -ge 2 && -n $2 ]] || die_usage "$1 needs a value"
      launch_opts+=(--bin "$2"); shift 2 ;;
    --mca) [[ $# -ge 3 ]] || die_usage "--mca needs NAME and VALUE"
      launch_opts+=(--mca "$2" "$3"); shift 3 ;;
    --mpirun-arg) [[ $# -ge 2 ]] || die_usage "$1 needs a value"
      launch_opts+=(--mpirun-arg "$2"); shift 2 ;;
    --launcher) [[ $# -ge 2 && -n $2 ]] || die_usage "$1 needs a value"
      read -r -a launcher <<<"$2"; multi_node=1; shift 2 ;;
    --timeout) [[ $# -ge 2 && $2 =~ $posint ]] || die_usage "--timeout wants seconds"
      timeout_s=$2; shift 2 ;;
    --out) [[ $# -ge 2 && -n $2 ]] || die_usage "$1 needs a value"; out=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    --interleave) interleave=1; shift ;;
    --no-report) report=0; shift ;;
    --run-reports) report_opts+=(--run-reports); shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; train_extra=("$@"); break ;;
    *) die_usage "unknown option '$1' (train flags go after --)" ;;
  esac
done

[[ -n $out ]] || out=sweeps/$(date +%Y%m%d-%H%M%S)

# ---- plan: every valid combination, in a stable order -------------------------------
names=() ; specs=()
declare -A seen=()
# The "algo" slot of a run: a sync run's all-reduce, or an asynchronous run's mode (async,
# sspK), which has no all-reduce.
slots=()
for mode in "${modes[@]}"; do
  if [[ $mode == sync ]]; then
    for algo in "${algos[@]}"; do [[ " ${slots[*]} " == *" $algo "* ]] || slots+=("$algo"); done
  else
    [[ " ${slots[*]} " == *" $mode "* ]] || slots+=("$mode")
  fi
done
for algo in "${slots[@]}"; do
  for ckpt in "${ckpts[@]}"; do
    for np in "${ranks[@]}"; do
      if [[ $algo == async || $algo == ssp* ]] && ((np <= servers)); then
        echo "$prog: note: skipping $algo at np=$np (needs more ranks than --servers $servers)" >&2
        continue
      fi
      for ppn in "${ppns[@]}"; do
        eff_ppn=$ppn
        if [[ $ppn == auto ]]; then
          eff_ppn=
        else
          ((ppn > np)) && eff_ppn=$np  # more slots per node than ranks: same placement
          if ((!multi_node && eff_ppn < np)); then
            echo "$prog: note: skipping np=$np ppn=$ppn (needs --hostfile or a cluster" \
              "--launcher with $(((np + eff_ppn - 1) / eff_ppn)) nodes)" >&2
            continue
          fi
        fi
        for b in "${batch_sizes[@]}"; do
          if [[ $scaling == strong ]]; then
            # Asynchronous runs: the workers (not the servers) share the global batch.
            parts=$np what=ranks
            [[ $algo == async || $algo == ssp* ]] && parts=$((np - servers)) what=workers
            ((b % parts == 0)) ||
              die_usage "strong scaling: global batch $b is not divisible by $parts $what"
            per_rank=$((b / parts)); prefix=gb
          else
            per_rank=$b; prefix=b
          fi
          for ((rep = 1; rep <= repeats; rep++)); do
            name_ppn=${eff_ppn:-auto}
            [[ -z $eff_ppn ]] && ((!multi_node)) && name_ppn=$np  # every rank on this host
            name="$prefix$b-np$np-ppn$name_ppn-$algo-ckpt$ckpt-r$rep"
            [[ -z ${seen[$name]:-} ]] || continue
            seen[$name]=1
            names+=("$name")
            specs+=("$b $per_rank $np ${eff_ppn:--} $algo $ckpt $rep")
          done
        done
      done
    done
  done
done
[[ ${#names[@]} -gt 0 ]] || die_usage "the grid is empty (see the notes above)"
if ((interleave)); then
  # Repeat-major order (the repeat is a spec's last field), combinations in grid order.
  ordered_names=() ordered_specs=()
  for ((rep = 1; rep <= repeats; rep++)); do
    for i in "${!names[@]}"; do
      [[ ${specs[$i]##* } == "$rep" ]] || continue
      ordered_names+=("${names[$i]}"); ordered_specs+=("${specs[$i]}")
    done
  done
  names=("${ordered_names[@]}") specs=("${ordered_specs[@]}")
fi

# The launcher and train command of run $1 (its spec fields), into the array `cmd`.
build_cmd() {
  local run_dir=$1 b=$2 per_rank=$3 np=$4 ppn=$5 algo=$6 ckpt=$7
  cmd=("${launcher[@]}" -np "$np")
  [[ $ppn != - ]] && cmd+=(--ppn "$ppn")
  cmd+=("${launch_opts[@]}" -- train --model "$model" --dataset "$dataset" --epochs "$epochs"
    --batch-size "$per_rank" --run-dir "$run_dir")
  case $algo in
    async) cmd+=(--mode async --servers "$servers") ;;
    ssp*) cmd+=(--mode async --servers "$servers" --max-staleness "${algo#ssp}") ;;
    *) cmd+=(--allreduce "$algo") ;;
  esac
  if [[ $ckpt == on ]]; then
    cmd+=(--checkpoint-every "$ckpt_every" --checkpoint-dir "$run_dir/checkpoints")
  fi
  cmd+=("${train_extra[@]}")
}

total=${#names[@]}
if ((dry_run)); then
  echo "$prog: $total run(s) into $out ($scaling scaling)"
  for i in "${!names[@]}"; do
    read -r b per_rank np ppn algo ckpt rep <<<"${specs[$i]}"
    build_cmd "$out/${names[$i]}" "$b" "$per_rank" "$np" "$ppn" "$algo" "$ckpt"
    state=
    [[ -f $out/${names[$i]}/summary.json ]] && state=" (done, would be skipped)"
    printf '[%d/%d] %s%s\n    %s\n' $((i + 1)) "$total" "${names[$i]}" "$state" "${cmd[*]}"
  done
  exit 0
fi

mkdir -p "$out"
{
  printf '{"scaling": %s, "model": %s, "dataset": %s, "epochs": %s, "repeats": %s,\n' \
    "$(json_str "$scaling")" "$(json_str "$model")" "$(json_str "$dataset")" "$epochs" "$repeats"
  printf ' "modes": %s, "servers": %s,\n' "$(json_str "${modes[*]}")" "$servers"
  # How the runs were launched (paths inside the repository shown relative to it), so a report
  # can say e.g. that they ran on an emulated cluster with 1 Gbit/s links.
  repo=$(cd "$here/../.." && pwd)
  launch="${launcher[*]}"
  printf ' "hostfile": %s, "train_extra": %s, "launcher": %s, "launch_options": %s,\n' \
    "$(json_str "$hostfile")" "$(json_str "${train_extra[*]}")" \
    "$(json_str "${launch//$repo\//}")" "$(json_str "${launch_opts[*]}")"
  printf ' "runs": %s}\n' "$total"
} >"$out/sweep.json"

interrupted=0
trap 'interrupted=1' INT TERM
failures=0
for i in "${!names[@]}"; do
  name=${names[$i]}
  run_dir=$out/$name
  read -r b per_rank np ppn algo ckpt rep <<<"${specs[$i]}"
  if [[ -f $run_dir/summary.json ]]; then
    echo "[$((i + 1))/$total] $name: done, skipped"
    continue
  fi
  if [[ -e $run_dir ]]; then  # an earlier failed attempt: keep it aside for the post-mortem
    mkdir -p "$out/.attempts"
    mv "$run_dir" "$out/.attempts/$name.$(date +%Y%m%d-%H%M%S).$$"
  fi
  mkdir -p "$run_dir"
  build_cmd "$run_dir" "$b" "$per_rank" "$np" "$ppn" "$algo" "$ckpt"
  run=("${cmd[@]}")
  [[ -n $timeout_s ]] && run=(timeout --signal=TERM --kill-after=10 "$timeout_s" "${cmd[@]}")
  echo "[$((i + 1))/$total] $name: running"
  started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  t0=$(date +%s.%N)
  rc=0
  "${run[@]}" >"$run_dir/launch.log" 2>&1 </dev/null || rc=$?
  t1=$(date +%s.%N)
  if ((interrupted)); then
    status=interrupted
  elif ((rc == 124)) && [[ -n $timeout_s ]]; then
    status=timeout
  elif ((rc != 0)); then
    status=failed
  elif [[ ! -f $run_dir/summary.json ]]; then
    status=incomplete  # exit 0 but no summary: the trainer did not finish its run
  else
    status=ok
  fi
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
  global=$((per_rank * np))
  [[ $algo == async || $algo == ssp* ]] && global=$((per_rank * (np - servers)))  # one round
  # An asynchronous run: its mode, servers and staleness bound instead of an all-reduce.
  case $algo in
    async) rec_mode='"async"' rec_algo=null rec_servers=$servers rec_k=-1 ;;
    ssp*) rec_mode='"async"' rec_algo=null rec_servers=$servers rec_k=${algo#ssp} ;;
    *) rec_mode='"sync"' rec_algo=$(json_str "$algo") rec_servers=null rec_k=null ;;
  esac
  rec_ppn=$ppn
  if [[ $ppn == - ]]; then
    rec_ppn=null
    ((multi_node)) || rec_ppn=$np  # every rank on this host
  fi
  {
    printf '{"name": %s, "model": %s, "dataset": %s,\n' \
      "$(json_str "$name")" "$(json_str "$model")" "$(json_str "$dataset")"
    printf ' "batch_size": %s, "scaling": %s, "per_rank_batch": %s,\n' \
      "$b" "$(json_str "$scaling")" "$per_rank"
    printf ' "global_batch": %s, "np": %s, "ppn": %s, "allreduce": %s, "checkpoint": %s,\n' \
      "$global" "$np" "$rec_ppn" "$rec_algo" "$(json_str "$ckpt")"
    printf ' "mode": %s, "servers": %s, "max_staleness": %s,\n' "$rec_mode" "$rec_servers" "$rec_k"
    printf ' "repeat": %s, "status": %s, "exit_code": %s, "launcher_wall_s": %s,\n' \
      "$rep" "$(json_str "$status")" "$rc" "$wall"
    printf ' "started": %s, "log": "launch.log", "command": %s}\n' \
      "$(json_str "$started")" "$(json_str "${cmd[*]}")"
  } >"$run_dir/sweep-run.json"
  if [[ $status != ok ]]; then
    failures=$((failures + 1))
    echo "[$((i + 1))/$total] $name: $status (exit $rc, ${wall} s); log: $run_dir/launch.log" >&2
    { grep -iE 'error|exception' "$run_dir/launch.log" | tail -n 3 ||
      tail -n 5 "$run_dir/launch.log"; } |
      sed 's/^/    /' >&2
  else
    echo "[$((i + 1))/$total] $name: ok (${wall} s)"
  fi
  if ((interrupted)); then
    echo "$prog: interrupted; re-run the same command to continue" >&2
    break
  fi
done

if ((report)); then
  /usr/bin/python3 "$here/../plot/sweep_report.py" "${report_opts[@]}" "$out" || echo "$prog: warning: the report failed" >&2
fi
((interrupted)) && exit 130
((failures == 0)) || { echo "$prog: $failures of $total run(s) did not succeed" >&2; exit 1; }
exit 0
