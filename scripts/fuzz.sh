#!/usr/bin/env bash
# Builds the libFuzzer harnesses of test/fuzz with clang (AddressSanitizer + UBSan) and runs
# each one: first over its committed regression inputs (test/fuzz/regressions/<target>:
# every crash ever found), then fuzzing from its seed corpus for --time seconds or until
# --runs executions (both: whichever comes first). Prints, per target, the executions, the
# seconds and the outcome. Non-zero if any input crashes; the crashing input is left in
# <build>/crashes/<target>/.
#
#   scripts/fuzz.sh                          # 30 s per target
#   scripts/fuzz.sh --time 15 --jobs 2       # CI: 2 processes x 15 s per target
#   scripts/fuzz.sh --runs 1000000           # the release bar: 1M executions per target
#   scripts/fuzz.sh --time 14400 --jobs 2    # a long run: 4 hours per target
#   scripts/fuzz.sh --targets mat,json       # a subset
# A new crash becomes a regression: copy it to test/fuzz/regressions/<target>/, fix, commit.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${RINGTRAIN_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=
runs=
targets=idx,cifar,mat,jpeg,png,shard,checkpoint,json,onnx
jobs=1
positive() {
  [[ $2 =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: $1 takes a positive integer (got '$2')" >&2; exit 2; }
}
while [[ $# -gt 0 ]]; do
  [[ $1 == --time || $1 == --runs || $1 == --targets || $1 == --jobs ]] && [[ $# -lt 2 ]] &&
    { echo "fuzz.sh: $1 needs a value (see the header of $0)" >&2; exit 2; }
  case $1 in
    --time) positive --time "$2"; seconds=$2; shift 2 ;;
    --runs) positive --runs "$2"; runs=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    --jobs) positive --jobs "$2"; jobs=$2; shift 2 ;;
    *) echo "fuzz.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
# Neither given: 30 s. --runs alone: no time limit.
[[ -z $seconds && -z $runs ]] && seconds=30
limits=(-max_total_time="${seconds:-0}")
# With --jobs N, every job is its own libFuzzer process with its own -runs: split the total.
[[ -n $runs ]] && limits+=(-runs=$(((runs + jobs - 1) / jobs)))

"$root/scripts/setup.sh" --fuzz
cc=$(command -v clang-14 || command -v clang)
cxx=$(command -v clang++-14 || command -v clang++)
# A unity build, as the sanitizer stage's (scripts/test.sh says why): the harnesses link most of
# src/, and compiling it in groups took the build on a 2-core Zen 3 from 280 s to 173 s.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DRINGTRAIN_BUILD_TESTS=OFF -DRINGTRAIN_FUZZ=ON -DRINGTRAIN_SANITIZE=address,undefined \
  -DCMAKE_UNITY_BUILD=ON >/dev/null
IFS=, read -r -a list <<< "$targets"
cmake --build "$build" -j "${RINGTRAIN_JOBS:-$(nproc)}" --target make_seeds $(printf 'fuzz_%s ' "${list[@]}")

rm -rf "$build/seeds"
"$build/test/fuzz/make_seeds" "$build/seeds" >/dev/null
# Leak reports from a reader's exception paths would be ringtrain's bugs: leaks stay on.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for t in "${list[@]}"; do
  exe=$build/test/fuzz/fuzz_$t
  corpus=$build/corpus/$t
  crashes=$build/crashes/$t
  mkdir -p "$corpus" "$crashes"
  regressions=("$root/test/fuzz/regressions/$t"/*)
  if [[ -e ${regressions[0]} ]]; then
    "$exe" "${regressions[@]}" > "$build/fuzz_$t.regressions.log" 2>&1 \
      || { echo "fuzz_$t: a regression input crashes (see $build/fuzz_$t.regressions.log)" >&2; status=1; continue; }
  fi
  # -rss_limit_mb: a reader must not allocate what a file merely claims. With --jobs N,
  # libFuzzer runs N processes sharing the corpus, each logging to fuzz-<i>.log.
  parallel=()
  [[ $jobs -gt 1 ]] && parallel=(-jobs="$jobs" -workers="$jobs")
  rm -f "$build"/fuzz-*.log
  start=$SECONDS
  if (cd "$build" && "$exe" "$corpus" "$build/seeds/$t" "${limits[@]}" -rss_limit_mb=2048 -timeout=10 \
      "${parallel[@]}" -artifact_prefix="$crashes/" -print_final_stats=1 > "$build/fuzz_$t.log" 2>&1); then
    # A single process writes its statistics to fuzz_<t>.log. With --jobs N each job writes
    # fuzz-<i>.log and the parent copies every finished job's log into its own output, so
    # only the job logs are counted (counting both doubled the figure).
    logs=("$build/fuzz_$t.log")
    if [[ $jobs -gt 1 ]]; then
      logs=()
      for f in "$build"/fuzz-*.log; do [[ -e $f ]] && logs+=("$f"); done
    fi
    executed=$(awk '$1 == "stat::number_of_executed_units:" {s += $2} END {print s + 0}' "${logs[@]}" /dev/null)
    echo "fuzz_$t: $executed executions in $((SECONDS - start)) s, 0 crashes"
  else
    echo "fuzz_$t: CRASH (input in $crashes/, log $build/fuzz_$t.log)" >&2
    tail -40 "$build/fuzz_$t.log" >&2
    status=1
  fi
done
exit $status
