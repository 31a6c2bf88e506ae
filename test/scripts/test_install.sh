#!/usr/bin/env bash
# Tests `cmake --install`: ringtrain and allreduce_bench land in PREFIX/bin and run from there;
# run.sh (and so sweep.sh) uses an installed ringtrain on PATH when the build tree has none,
# and says how to get one when there is neither.
# usage: test_install.sh BUILD_DIR
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
build=$1
run=$here/../../scripts/mpirun/run.sh
sweep=$here/../../scripts/mpirun/sweep.sh

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/log" 2>&1 || fail "cmake --install failed: $(cat "$tmp/log")"
for prog in ringtrain allreduce_bench; do
  [[ -x $tmp/prefix/bin/$prog ]] || fail "no $tmp/prefix/bin/$prog"
done
"$tmp/prefix/bin/ringtrain" models >/dev/null 2>&1 || fail "the installed ringtrain does not run"

# No build tree (RINGTRAIN_BUILD_DIR names an empty one), the install on PATH.
mkdir -p "$tmp/nobuild"
export RINGTRAIN_BUILD_DIR=$tmp/nobuild
unset RINGTRAIN_BIN
line=$(PATH="$tmp/prefix/bin:$PATH" "$run" --dry-run -np 1 train)
[[ $line == *" $tmp/prefix/bin/ringtrain train"* ]] || fail "run.sh should launch the installed ringtrain: $line"
PATH="$tmp/prefix/bin:$PATH" "$sweep" --ranks 1 --model logreg --dataset synthetic --threads 1 \
  --out "$tmp/sw" --no-report -- --max-steps 2 --quiet >"$tmp/log" 2>&1 ||
  fail "sweep.sh with the installed ringtrain failed: $(cat "$tmp/log") $(cat "$tmp"/sw/*/launch.log)"
[[ -f $tmp/sw/b64-np1-ppn1-ring-ckptoff-r1/summary.json ]] || fail "the sweep's run did not finish"
# Neither: a runtime error that says how to get one.
"$run" -np 1 train >"$tmp/out" 2>&1
rc=$?
[[ $rc -eq 1 ]] && grep -q "cmake --install" "$tmp/out" || fail "no binary anywhere: exit $rc: $(cat "$tmp/out")"
finish test_install "$tmp/log"
