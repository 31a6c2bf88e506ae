#!/usr/bin/env bash
# Launch ringtrain under mpirun: rank placement (processes per node, cores per rank, binding),
# the environment every rank needs, and the ringtrain command line after the launcher options.
#
# usage: run.sh [launcher options] [--] <ringtrain arguments...>
#   run.sh -np 2 train --model lenet5 --dataset fashion-mnist --epochs 1 --batch-size 64
#   run.sh -np 4 --ppn 2 --hostfile hosts --mca btl_tcp_if_include eth0 -- train ...
#   run.sh --elastic --min-np 2 --max-np 4 --hostfile hosts -- train --logical-shards 12 --run-dir D ...
#     (relaunches on the hosts that still answer after a rank fails: scripts/mpirun/elastic.py)
# Launcher options end at `--` or at the first argument that is not one of them (the
# ringtrain subcommand, e.g. `train`). Run with --help for the list.
#
# The environment every mpirun of this project needs is built here and only here: the
# functions below. quickstart.sh launches through run.sh; cluster.sh and test.sh, which
# start mpirun (or ctest) themselves, `source run.sh`, which defines the functions and
# returns before anything else happens.

# mpirun_root_env: the variables Open MPI wants in mpirun's environment before it starts
# as root, in the array MPIRUN_ROOT_ENV (empty for other users).
mpirun_root_env() {
  MPIRUN_ROOT_ENV=()
  if [[ $(id -u) -eq 0 ]]; then
    MPIRUN_ROOT_ENV=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
  fi
}
# threads_per_rank RANKS_PER_NODE CORES: OpenMP threads per rank so that the ranks of a
# node share its cores, at least 1.
threads_per_rank() {
  local t=$(($2 / $1))
  echo $((t >= 1 ? t : 1))
}
# needs_oversubscribe RANKS_PER_NODE CORES: whether mpirun needs --oversubscribe, which it
# wants as soon as a node gets more ranks than cores.
needs_oversubscribe() { (($1 > $2)); }

if [[ ${BASH_SOURCE[0]} != "$0" ]]; then
  return 0
fi
set -euo pipefail

prog=run.sh
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

usage() {
  cat <<'EOF'
usage: run.sh [options] [--] <ringtrain arguments...>
Options with a value take it as `--opt value` or `--opt=value`.

Placement
  -np N, --np N          number of ranks (default 1)
  --ppn P                processes (ranks) per node (default: N on the local host;
                         1 per host line with --hostfile when N equals the host count)
  --hostfile FILE        Open MPI hostfile; without it every rank runs on this host
  --threads T            OMP_NUM_THREADS per rank (default: cores / ranks per node, >= 1;
                         with --hostfile the nodes are assumed to have this host's core count)
  --cores-per-node C     core count of each node (default: this host's, from nproc)
  --no-bind              do not bind ranks to cores (--bind-to none)
Environment
  --env NAME[=VALUE]     also export NAME to every rank (repeatable)
Pass-through to mpirun
  --mca NAME VALUE       add `--mca NAME VALUE` (repeatable); odls_base_sigkill_timeout is 10
                         unless given here or in the environment, so a SIGTERM to mpirun
                         leaves the ranks time to checkpoint (Open MPI's default is 1 s)
  --mpirun-arg ARG       add one raw argument to mpirun (repeatable, order kept)
  --mpirun PATH          mpirun executable (default: $MPIRUN or mpirun)
Program
  --bin PATH             ringtrain binary (default: $RINGTRAIN_BIN, else the build tree's
                         ${RINGTRAIN_BUILD_DIR:-<repo>/build}/apps/ringtrain, else an installed
                         `ringtrain` on PATH, e.g. from cmake --install)
  --dry-run              print the command line and exit without running it
  -h, --help             this text
Elastic (relaunch on the hosts that still answer after a rank fails; docs/run-directory.md)
  --elastic              run `train` in launches: when mpirun ends because a rank failed
                         (any exit status but 0, 2 and a stop asked of this script), ask every
                         host of --hostfile whether it answers (`<agent> HOST true`, the agent
                         being --mca plm_rsh_agent's value, else ssh), write the answering ones
                         to <run-dir>/elastic-hostfile (yours is not touched) and relaunch with
                         --resume auto and the same --run-dir, at the largest rank count that
                         divides --logical-shards S (any count without it: results then depend
                         on it), fits their slots (or --ppn per host) and lies in
                         [--min-np, --max-np]; a host that answers again is used again.
                         A launch ended by a stall timeout is reported with the ranks its
                         stall watchdogs named (rank, host, where last seen).
                         Needs --hostfile and train's --run-dir (sync mode); replaces -np.
                         --run-dir, --logical-shards and --mode may also come from train's
                         --config file (TOML; the command line wins, as for ringtrain).
                         Each change goes to <run-dir>/membership.jsonl and summary.json's
                         `membership`. A launch's odls_base_sigkill_timeout is 2 (not 10)
                         unless given: a failed launch then ends in ~4 s instead of ~20 s.
  --min-np A             fewest ranks to relaunch with (default 1); fewer: stop, with the
                         failed launch's exit status
  --max-np B             most ranks (default: the hostfile's slots)
  --max-restarts R       relaunches at most (default 10); also no relaunch after a launch
                         that failed before its first step while the same hosts answer
  --probe-timeout S      seconds a host has to answer (default 5)

Binding: with P ranks per node and T threads each, P*T <= cores gives
  --map-by ppr:P:node:PE=T --bind-to core   (OMP_PROC_BIND=close, OMP_PLACES=cores)
otherwise (or with --no-bind) --map-by ppr:P:node --bind-to none, and --oversubscribe
when P exceeds the cores of a node. Exit codes: mpirun's, 2 for a usage error.

Stopping: SIGTERM or SIGINT (Ctrl-C) to this script is passed to mpirun as SIGUSR2, which
mpirun forwards to every rank at once; ringtrain stops inside its step, checkpoints the
last completed step and exits 75 ("resume me": rerun with --resume auto), as does this script.
With --elastic the stop is passed on the same way and nothing is relaunched.
EOF
}

die_usage() {
  echo "$prog: error: $*" >&2
  echo "$prog: see '$prog --help'" >&2
  exit 2
}

is_posint() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }

need_value() {  # need_value FLAG REMAINING_ARGS...
  local flag=$1
  shift
  [[ $# -ge 1 && -n $1 ]] || die_usage "$flag needs a value"
}

np=1
ppn=
hostfile=
threads=
cores=
bind=1
dry_run=0
bin=${RINGTRAIN_BIN:-}
mpirun_exe=${MPIRUN:-mpirun}
env_names=()
extra=()
np_given=0
elastic=0
elastic_opts=()
fwd=()  # with --elastic: the options each launch gets again (not -np, --hostfile, --ppn)

while [[ $# -gt 0 ]]; do
  # --opt=value is --opt value (launcher options only: the loop ends at the subcommand).
  if [[ $1 == --?*=* ]]; then
    case ${1%%=*} in
      --np | --ppn | --hostfile | --threads | --cores-per-node | --env | --mpirun-arg | --mpirun | --bin | \
        --min-np | --max-np | --max-restarts | --probe-timeout)
        set -- "${1%%=*}" "${1#*=}" "${@:2}" ;;
      --no-bind | --dry-run | --help | --elastic) die_usage "${1%%=*} takes no value" ;;
      --mca) die_usage "--mca takes NAME and VALUE as two arguments" ;;
    esac
  fi
  case $1 in
    -np | --np | -n)
      need_value "$@"; is_posint "$2" || die_usage "$1 wants a positive integer, got '$2'"
      np=$2; np_given=1; shift 2 ;;
    --ppn)
      need_value "$@"; is_posint "$2" || die_usage "--ppn wants a positive integer, got '$2'"
      ppn=$2; shift 2 ;;
    --hostfile)
      need_value "$@"; hostfile=$2; shift 2 ;;
    --threads)
      need_value "$@"; is_posint "$2" || die_usage "--threads wants a positive integer, got '$2'"
      threads=$2; fwd+=("$1" "$2"); shift 2 ;;
    --cores-per-node)
      need_value "$@"
      is_posint "$2" || die_usage "--cores-per-node wants a positive integer, got '$2'"
      cores=$2; fwd+=("$1" "$2"); shift 2 ;;
    --no-bind)
      bind=0; fwd+=("$1"); shift ;;
    --env)
      need_value "$@"
      [[ $2 =~ ^[A-Za-z_][A-Za-z0-9_]*(=.*)?$ ]] ||
        die_usage "--env wants NAME or NAME=VALUE, got '$2'"
      env_names+=("$2"); fwd+=("$1" "$2"); shift 2 ;;
    --mca)
      [[ $# -ge 3 && -n $2 ]] || die_usage "--mca needs NAME and VALUE"
      extra+=(--mca "$2" "$3"); fwd+=("$1" "$2" "$3"); shift 3 ;;
    --mpirun-arg)
      [[ $# -ge 2 ]] || die_usage "--mpirun-arg needs a value"
      extra+=("$2"); fwd+=("$1" "$2"); shift 2 ;;
    --mpirun)
      need_value "$@"; mpirun_exe=$2; fwd+=("$1" "$2"); shift 2 ;;
    --bin)
      need_value "$@"; bin=$2; fwd+=("$1" "$2"); shift 2 ;;
    --dry-run)
      dry_run=1; fwd+=("$1"); shift ;;
    --elastic)
      elastic=1; shift ;;
    --min-np | --max-np | --max-restarts)
      need_value "$@"
      [[ $2 =~ ^[0-9]+$ ]] && { [[ $1 == --max-restarts ]] || is_posint "$2"; } ||
        die_usage "$1 wants a positive integer, got '$2'"
      elastic_opts+=("$1" "$2"); shift 2 ;;
    --probe-timeout)
      need_value "$@"
      [[ $2 =~ ^[0-9]+([.][0-9]+)?$ ]] || die_usage "--probe-timeout wants seconds, got '$2'"
      elastic_opts+=("$1" "$2"); shift 2 ;;
    -h | --help)
      usage; exit 0 ;;
    --)
      shift; break ;;
    -*)
      die_usage "unknown option '$1' (ringtrain's options go after the subcommand or after --)" ;;
    *)
      break ;;
  esac
done

[[ $# -gt 0 ]] || die_usage "no ringtrain arguments given (e.g. 'train --model lenet5 ...')"

if ((elastic)); then
  ((np_given)) && die_usage "--elastic chooses the rank count of each launch: give --min-np/--max-np, not -np"
  [[ -n $hostfile ]] || die_usage "--elastic needs --hostfile (the hosts it drops and takes back)"
  [[ -r $hostfile ]] || die_usage "hostfile '$hostfile' is not readable"
  # The agent mpirun reaches hosts with: the last plm_rsh_agent given, else the environment's.
  agent=${OMPI_MCA_plm_rsh_agent:-}
  for ((i = 0; i + 2 < ${#extra[@]}; i++)); do
    [[ ${extra[i]} == --mca && ${extra[i + 1]} == plm_rsh_agent ]] && agent=${extra[i + 2]}
  done
  [[ -n $ppn ]] && elastic_opts+=(--ppn "$ppn")
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  exec /usr/bin/python3 "$here/elastic.py" --run-sh "$here/run.sh" --hostfile "$hostfile" \
    --agent "$agent" "${elastic_opts[@]}" --launcher-args "${#fwd[@]}" "${fwd[@]}" -- "$@"
elif ((${#elastic_opts[@]})); then
  die_usage "${elastic_opts[0]} needs --elastic"
fi

# The binary: --bin, $RINGTRAIN_BIN, the build tree's, else an installed one on PATH.
if [[ -z $bin ]]; then
  bin=${RINGTRAIN_BUILD_DIR:-$repo/build}/apps/ringtrain
  if [[ ! -x $bin ]] && command -v ringtrain >/dev/null 2>&1; then
    bin=$(command -v ringtrain)
  fi
fi

if [[ -z $cores ]]; then
  cores=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
fi

# Nodes: the distinct hosts of the hostfile (comments and blank lines skipped), else 1.
nodes=1
if [[ -n $hostfile ]]; then
  [[ -r $hostfile ]] || die_usage "hostfile '$hostfile' is not readable"
  nodes=$(sed -e 's/#.*//' "$hostfile" | awk 'NF { print $1 }' | sort -u | wc -l)
  [[ $nodes -ge 1 ]] || die_usage "hostfile '$hostfile' names no host"
fi

if [[ -z $ppn ]]; then
  if [[ $nodes -eq 1 ]]; then
    ppn=$np
  else
    ppn=$(((np + nodes - 1) / nodes))  # spread evenly, the last node may hold fewer
  fi
fi
if [[ -z $hostfile && $ppn -lt $np ]]; then
  die_usage "--ppn $ppn < -np $np but without --hostfile every rank runs on this host"
fi
if ((ppn * nodes < np)); then
  die_usage "-np $np does not fit on $nodes node(s) x --ppn $ppn"
fi
ranks_per_node=$((ppn < np ? ppn : np))
if [[ -z $threads ]]; then
  threads=$(threads_per_rank "$ranks_per_node" "$cores")
fi

oversubscribed=0
if needs_oversubscribe "$ranks_per_node" "$cores"; then
  oversubscribed=1
fi
if [[ -n $hostfile ]]; then
  # mpirun refuses a node whose slots= is below the ranks placed on it; say so up front,
  # unless --oversubscribe is on the command line (added above, or by the caller).
  min_slots=$(sed -e 's/#.*//' "$hostfile" |
    awk 'NF { for (i = 2; i <= NF; i++) if ($i ~ /^slots=/) { split($i, a, "="); print a[2] } }' |
    sort -n | head -n 1)
  if [[ -n $min_slots ]] && ((min_slots < ranks_per_node)) &&
    ((!oversubscribed)) && [[ " ${extra[*]} " != *" --oversubscribe "* ]]; then
    echo "$prog: warning: hostfile '$hostfile' gives a node slots=$min_slots < $ranks_per_node" \
      "ranks per node; mpirun will refuse unless you add --mpirun-arg --oversubscribe" >&2
  fi
fi

if ((ranks_per_node * threads > cores)); then
  bind=0  # binding would put two ranks' threads on one core or fail in mpirun
fi

cmd=("$mpirun_exe" -np "$np")
[[ -n $hostfile ]] && cmd+=(--hostfile "$hostfile")
if ((bind)); then
  cmd+=(--map-by "ppr:$ppn:node:PE=$threads" --bind-to core)
else
  cmd+=(--map-by "ppr:$ppn:node" --bind-to none)
fi
((oversubscribed)) && cmd+=(--oversubscribe)
# On SIGTERM/SIGINT, Open MPI sends the ranks SIGTERM odls_base_sigkill_timeout seconds later
# and SIGKILL as long again (1 s by default): too soon for ringtrain to finish its step and the
# checkpoint. The same delay holds when a rank fails: the others get their SIGTERM only after
# it (measured, Open MPI 4.1.4: a failed rank's job ends after 1.7 s at 1 s, 59.7 s at 30 s).
# 10 s: a step of a large model plus its checkpoint, and a failed job gone within ~20 s.
# Unless the caller chose a value (--mca or the environment).
if [[ " ${extra[*]} " != *" odls_base_sigkill_timeout "* && -z ${OMPI_MCA_odls_base_sigkill_timeout:-} ]]; then
  cmd+=(--mca odls_base_sigkill_timeout 10)
fi

# Every rank gets the same thread count; pinned OpenMP threads only make sense inside a
# rank's own cores, so OMP_PROC_BIND/OMP_PLACES are set only when ranks are bound.
env_assign=(OMP_NUM_THREADS="$threads")
if ((bind)); then
  env_assign+=(OMP_PROC_BIND=close OMP_PLACES=cores)
fi
for a in "${env_assign[@]}"; do
  cmd+=(-x "$a")
done
for name in PATH LD_LIBRARY_PATH; do
  [[ -n ${!name:-} ]] && cmd+=(-x "$name")
done
for e in "${env_names[@]}"; do
  cmd+=(-x "$e")
done
cmd+=("${extra[@]}")
cmd+=("$bin" "$@")

mpirun_root_env
root_env=("${MPIRUN_ROOT_ENV[@]}")

if ((dry_run)); then
  line=
  for w in "${root_env[@]}" "${cmd[@]}"; do
    if [[ $w =~ ^[A-Za-z0-9_./:=,@+-]+$ ]]; then
      line+="$w "
    else
      line+="$(printf '%q' "$w") "
    fi
  done
  echo "${line% }"
  exit 0
fi

if [[ ! -x $bin ]]; then
  echo "$prog: error: ringtrain binary '$bin' not found or not executable" \
    "(build it with scripts/build.sh, install it on PATH with cmake --install, or pass --bin)" >&2
  exit 1
fi
if ((${#root_env[@]})); then
  export "${root_env[@]}"
fi
export OMP_NUM_THREADS="$threads"
# A SIGTERM or SIGINT to this script (kill, Ctrl-C, a scheduler) becomes SIGUSR2 to mpirun,
# which forwards it to every rank at once: ringtrain stops inside the step, writes its
# checkpoint and exits 75, and so does this script. (mpirun's own handling of SIGTERM sends
# the ranks SIGCONT, their SIGTERM only odls_base_sigkill_timeout seconds later and SIGKILL
# as long again, and exits 1. A Ctrl-C in a terminal reaches mpirun too, so the ranks still
# stop at once with their checkpoint, but the exit status is then mpirun's 1.)
"${cmd[@]}" &
mpirun_pid=$!
trap 'kill -USR2 "$mpirun_pid" 2>/dev/null' TERM INT
# The trap ends `wait` early (status > 128) while mpirun still runs: wait again until it has
# gone, then ask bash for the status it kept (mpirun may end between the two calls, so the
# interrupted wait's status is never the answer).
while kill -0 "$mpirun_pid" 2>/dev/null; do
  wait "$mpirun_pid" || true
done
status=0
wait "$mpirun_pid" || status=$?
exit "$status"
