#!/usr/bin/env bash
# End-to-end checks of `ringtrain` under mpirun: run directory contents, the merged trace,
# SIGTERM + resume bit-identical to an uninterrupted run, a SIGKILLed rank never hangs the
# job, and every bad input (config mismatch, corrupt or foreign checkpoint, damaged
# checkpoint metadata, a directory as checkpoint, sizes beyond memory, NaN loss, usage
# errors, a full disk under a log) gives its one-line error on every rank and a non-zero
# exit; a log cut off mid-line is read with a warning; a stopped rank ends the job through
# the stall watchdog; TensorBoard event files decode and match the logs; --config files
# apply, lose to flags, round-trip, and fail in one line naming the file and the key;
# --precision bf16 is refused without native bf16 and otherwise trains and resumes in fp32;
# --tuning files are read on every rank and auto's choice is named on the start line and
# in summary.json.
# Usage: cli_test.sh <ringtrain binary> <case>
set -uo pipefail

bin=$1
case_name=$2
py=/usr/bin/python3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d /tmp/ringtrain_cli_test.XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
mpi=(mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
# --log-every 1: the cases count step records to know how far a run has got.
data=(--dataset synthetic --synthetic-shape 1x28x28 --synthetic-train 512 --synthetic-test 200 --model lenet5
      --batch-size 16 --lr 0.02 --log-every 1 --quiet)

fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source=../support/mpi_ranks.sh
source "$here/../support/mpi_ranks.sh"
expect_fail() {  # expect_fail <log> <expected exit: nonzero|2> <pattern> <ranks>
  local log=$1 want=$2 pattern=$3 ranks=$4 code=$5
  if [[ $want == 2 && $code -ne 2 ]]; then cat "$log" >&2; fail "expected exit 2, got $code"; fi
  if [[ $code -eq 0 ]]; then cat "$log" >&2; fail "expected a non-zero exit"; fi
  for ((r = 0; r < ranks; r++)); do
    grep -qE "ringtrain: \[rank $r\] error: .*$pattern" "$log" || { cat "$log" >&2; fail "rank $r did not report '$pattern'"; }
  done
}
step_records() { local n; n=$(grep -c '"type":"step"' "$1" 2>/dev/null); echo "${n:-0}"; }
one_line_error() {  # one_line_error <log> <exit> <expected exit> <pattern>: a local command's only output
  local log=$1 code=$2 want=$3 pattern=$4
  [[ $code -eq $want ]] || { cat "$log" >&2; fail "expected exit $want, got $code ($pattern)"; }
  grep -qE "^ringtrain: error: .*$pattern" "$log" || { cat "$log" >&2; fail "no error matching '$pattern'"; }
  [[ $(wc -l < "$log") -eq 1 ]] || { cat "$log" >&2; fail "more than one line of output for '$pattern'"; }
}
params_crc() { "$bin" inspect "$1" | $py -c 'import json,sys; print(json.load(sys.stdin)["sections"]["params_crc32"])'; }

# The cases live in cli_cases_*.sh, one function case_<name> each, by theme.
for f in "$here"/cli_cases_*.sh; do
  # shellcheck source=/dev/null
  source "$f"
done
declare -F "case_$case_name" > /dev/null || fail "unknown case $case_name"
"case_$case_name"
echo "PASS: $case_name"
