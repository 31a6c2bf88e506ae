# Sourced by the bash script tests: a temporary directory removed on exit, and a failure
# counter that `fail` raises and `finish NAME [LOG]` turns into the exit status.
set -uo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
finish() {
  if ((fails)); then
    echo "$1: $fails failure(s)"
    [[ -n ${2:-} ]] && cat "$2"
    exit 1
  fi
  echo "$1: all checks passed"
}

# same_final_state BIN GOT REF STEP WHAT: fails unless the checkpoints GOT and REF (what
# `BIN inspect` reads) are both at global step STEP and hold bit-identical parameters, buffers
# and optimizer state (the three float sections end the file: Checkpoint::serialize). WHAT
# names GOT's run in the messages.
same_final_state() {
  local bin=$1 got=$2 ref=$3 step=$4 what=$5 steps n ref_steps ref_n
  if [[ ! -f $got || ! -f $ref ]]; then
    fail "no model.rtck ($what: $(ls "$(dirname "$got")" 2>&1 | paste -sd' '))"
    return
  fi
  floats() { "$bin" inspect "$1" | /usr/bin/python3 -c 'import json, sys
d = json.load(sys.stdin); s = d["sections"]
print(d["global_step"], s["params_floats"] + s["buffers_floats"] + s["optimizer_floats"])'; }
  read -r steps n < <(floats "$got")
  read -r ref_steps ref_n < <(floats "$ref")
  [[ $steps == "$step" && $ref_steps == "$step" && $n == "$ref_n" ]] || fail "steps $steps/$ref_steps, floats $n/$ref_n"
  cmp -s <(tail -c $((4 * n)) "$got") <(tail -c $((4 * n)) "$ref") ||
    fail "the $what's final parameters/optimizer state differ from the uninterrupted 1-rank run's"
}

# For the tests on emulated nodes (scripts/mpirun/cluster.sh): skip (exit 77, SKIP_RETURN_CODE)
# with a message naming what is missing, unless this is root with the tools and network
# namespaces allowed; then export RINGTRAIN_CLUSTER_ID as the first id in FIRST..LAST with no
# cluster up, so tests that ctest -j runs side by side stay apart.
#   cluster_test_setup FIRST LAST WHY TOOL...
skip() { echo "SKIP: $*"; exit 77; }
cluster_test_setup() {
  local first=$1 last=$2 why=$3 t id probe=rt-probe-$$
  shift 3
  [[ $(id -u) -eq 0 ]] || skip "needs root for $why"
  for t in "$@"; do command -v "$t" >/dev/null 2>&1 || skip "'$t' not found"; done
  ip netns add "$probe" 2>/dev/null || skip "'ip netns add' is not allowed here (a container without CAP_SYS_ADMIN?)"
  ip netns del "$probe"
  export RINGTRAIN_CLUSTER_ID=
  for id in $(seq "$first" "$last"); do
    [[ -e /run/ringtrain-cluster-$id ]] || { RINGTRAIN_CLUSTER_ID=$id; break; }
  done
  [[ -n $RINGTRAIN_CLUSTER_ID ]] || skip "no free cluster id in $first..$last"
}

# wait_for_step PID RANK0_LOG N TRIES: polls (every 0.1 s, at most TRIES times) until the
# rank-0 log has a step record of step >= N in the first epoch or PID has ended; prints the
# last step seen (0 if none).
wait_for_step() {
  local pid=$1 log=$2 n=$3 tries=$4 step=0 _
  for _ in $(seq "$tries"); do
    kill -0 "$pid" 2>/dev/null || break
    step=$(grep -o '"type":"step","t":[0-9.e+-]*,"epoch":1,"step":[0-9]*' "$log" 2>/dev/null |
      tail -n 1 | sed 's/.*"step"://')
    ((${step:-0} >= n)) && break
    sleep 0.1
  done
  echo "${step:-0}"
}
