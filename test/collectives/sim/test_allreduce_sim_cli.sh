#!/usr/bin/env bash
# allreduce_sim's command line: usage errors exit 2 with one line naming the flag, a bad
# tuning file exits 1 naming it, and a tuning file's parameters reach the predictions.
set -uo pipefail
sim=$1
tmp=$(mktemp -d /tmp/allreduce-sim-cli-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

expect() {  # expect CODE PATTERN ARGS...
  local code=$1 pattern=$2
  shift 2
  "$sim" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [[ $rc -eq $code ]] || fail "allreduce_sim $*: exit $rc, expected $code ($(cat "$tmp/err"))"
  grep -q -- "$pattern" "$tmp/err" || fail "allreduce_sim $*: stderr lacks '$pattern': $(cat "$tmp/err")"
}

expect 2 "--np" --np 1
expect 2 "--sizes" --np 4 --sizes 6
expect 2 "mpi cannot be simulated" --np 4 --algo mpi
expect 2 "unknown all-reduce algorithm" --np 4 --algo nope
expect 2 "--rab-window" --np 4 --rab-window -1
expect 2 "--rab-lanes" --np 4 --rab-lanes -1
expect 2 "--rab-lanes" --np 4 --rab-lanes 65
expect 1 "$tmp/missing" --np 4 --tuning "$tmp/missing"
printf 'alpha_s = oops\n' >"$tmp/bad.tuning"
expect 1 "bad.tuning" --np 4 --tuning "$tmp/bad.tuning"

# The ring at 4 ranks, 64 KiB, one message per step: 2(p-1) alpha + (p-1)/p (2 n beta + n gamma).
"$sim" --np 4 --sizes 64K --algo ring >"$tmp/default" || fail "default run failed"
printf 'alpha_s = 0\n' >"$tmp/zero.tuning"
"$sim" --np 4 --sizes 64K --algo ring --tuning "$tmp/zero.tuning" >"$tmp/zero" || fail "tuning run failed"
default=$(awk '!/^#/{print $2}' "$tmp/default")
zero=$(awk '!/^#/{print $2}' "$tmp/zero")
# 6 rounds of 50 us fewer: 1097.2 -> 797.2 us.
[[ $default == 1097.2 && $zero == 797.2 ]] || fail "ring 64 KiB at 4 ranks: $default us (want 1097.2), alpha 0: $zero us (want 797.2)"
# rab's send window reaches the recording: one chunk ahead leaves the link idle while each
# chunk's partner chunk is awaited (slower at 1 MiB, 8 ranks), four chunks do not.
rab_at() { "$sim" --np 8 --sizes 1M --algo rab --rab-window "$1" | awk '!/^#/{print $2}'; }
w0=$(rab_at 0) w1=$(rab_at 1) w4=$(rab_at 4)
awk -v a="$w0" -v b="$w1" -v c="$w4" 'BEGIN{exit !(b > 1.05 * a && c == a)}' ||
  fail "rab 1 MiB at 8 ranks: window 0 $w0 us, window 1 $w1 us (want > 5% more), window 4 $w4 us (want equal)"
# rab's lanes reach the recording and the last column names them: forced 4 at 128 ranks,
# 4 MiB, 100 Gbit/s, the model's choice (more than one lane) without the flag, one lane at
# 4 ranks on 1 Gbit/s (the record's cells).
lanes_at() { "$sim" --np "$1" --sizes 4M --algo rab --link-gbit "$2" "${@:3}" | awk '!/^#/{print $2, $NF}'; }
read -r t4 k4 <<<"$(lanes_at 128 100 --rab-lanes 4)"
read -r t1 k1 <<<"$(lanes_at 128 100 --rab-lanes 1)"
read -r tm km <<<"$(lanes_at 128 100)"
read -r _ kr <<<"$(lanes_at 4 1)"
awk -v a="$t4" -v b="$t1" -v c="$tm" -v ka="$k4" -v kb="$k1" -v kc="$km" -v kd="$kr" \
  'BEGIN{exit !(ka == 4 && kb == 1 && kc > 1 && kd == 1 && a < 0.95 * b && c < 0.95 * b)}' ||
  fail "rab 4 MiB at 128 ranks, 100 Gbit/s: 4 lanes $t4 us ($k4), 1 lane $t1 us ($k1), the model's $tm us ($km lanes); 4 ranks at 1 Gbit/s: $kr lanes"
echo "allreduce_sim CLI: ok"
