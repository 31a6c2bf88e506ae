#!/usr/bin/env bash
# Builds the libFuzzer harnesses of test/fuzz with clang (AddressSanitizer + UBSan) and runs
# each one: first over its committed regression inputs (test/fuzz/regressions/<target>:
# every crash ever found), then fuzzing from its seed corpus for --time seconds.
# Non-zero if any input crashes; the crashing input is left in <build>/crashes/<target>/.
#
#   scripts/fuzz.sh                          # CI: 30 s per target
#   scripts/fuzz.sh --time 14400 --jobs 2    # the long run: 4 hours per target
#   scripts/fuzz.sh --targets mat,json       # a subset
# A new crash becomes a regression: copy it to test/fuzz/regressions/<target>/, fix, commit.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${RINGTRAIN_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=30
targets=idx,cifar,mat,checkpoint,json
jobs=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --time) seconds=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    *) echo "fuzz.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done

"$root/scripts/setup.sh" --fuzz
cc=$(command -v clang-14 || command -v clang)
cxx=$(command -v clang++-14 || command -v clang++)
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DRINGTRAIN_BUILD_TESTS=OFF -DRINGTRAIN_FUZZ=ON -DRINGTRAIN_SANITIZE=address,undefined >/dev/null
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
  if (cd "$build" && "$exe" "$corpus" "$build/seeds/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
      "${parallel[@]}" -artifact_prefix="$crashes/" -print_final_stats=1 > "$build/fuzz_$t.log" 2>&1); then
    # --jobs N leaves fuzz-<i>.log files, a single process none: count what exists (an
    # unmatched glob would make cat, and so this script under pipefail, fail).
    logs=("$build/fuzz_$t.log")
    for f in "$build"/fuzz-*.log; do [[ -e $f ]] && logs+=("$f"); done
    runs=$(cat "${logs[@]}" | grep -o 'stat::number_of_executed_units: *[0-9]*' |
           awk '{s += $2} END {print s + 0}')
    echo "fuzz_$t: ${seconds} s, $runs executions, no crash"
  else
    echo "fuzz_$t: CRASH (input in $crashes/, log $build/fuzz_$t.log)" >&2
    tail -40 "$build/fuzz_$t.log" >&2
    status=1
  fi
done
exit $status
