#!/usr/bin/env bash
# Set up, build and run the whole test suite with ctest. Non-zero on any failure.
#
#   scripts/test.sh [ctest args]     the suite (Release build in build/)
#   scripts/test.sh --sanitize       the suite again under AddressSanitizer + UBSan
#                                    (build-asan/; without the tests labelled `heavy`
#                                    (model-size repeats of paths smaller tests cover),
#                                    `wide` (np-4 repeats of test programs that also run
#                                    at np 1-3), `emulated_nodes` (the elastic kill test on
#                                    cluster.sh) or `scripts_only` (no compiled code runs
#                                    in them)), then the tests labelled `threads` (but not
#                                    `wide`) under ThreadSanitizer (build-tsan/); any
#                                    report fails the test that produced it
#   scripts/test.sh --sanitize=address | --sanitize=thread   one of the two
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sanitize=0
run_asan=1
run_tsan=1
args=()
for a in "$@"; do
  case $a in
    --sanitize) sanitize=1 ;;
    --sanitize=address) sanitize=1; run_tsan=0 ;;
    --sanitize=thread) sanitize=1; run_asan=0 ;;
    --sanitize=*) echo "test.sh: --sanitize takes address or thread (got '${a#--sanitize=}')" >&2; exit 2 ;;
    *) args+=("$a") ;;
  esac
done
"$root/scripts/setup.sh"
# Open MPI refuses to run as root unless told; CI runs as root. run.sh knows the variables.
# shellcheck source=mpirun/run.sh
source "$root/scripts/mpirun/run.sh"
mpirun_root_env
if ((${#MPIRUN_ROOT_ENV[@]})); then
  export "${MPIRUN_ROOT_ENV[@]}"
fi
jobs=${RINGTRAIN_TEST_JOBS:-2}

if [[ $sanitize -eq 0 ]]; then
  "$root/scripts/build.sh"
  cd "${RINGTRAIN_BUILD_DIR:-$root/build}"
  exec ctest --output-on-failure -j "$jobs" "${args[@]}"
fi

supp=$root/test/sanitizers
status=0
# The sanitizer builds are unity builds (CMake joins up to 8 sources of a target into one
# translation unit): each header (oneDNN's, fmt's, CLI11's, Catch2's) is parsed and its inline
# code compiled under instrumentation once per group instead of once per file (on a 2-core Zen 3
# the ASan build took 773 s instead of 920-950 s, the TSan build 267 s instead of ~400 s).
# The Release build above compiles every file on its own, so a file that does not compile
# by itself still fails there; what a group hides is only ASan's initialization-order check
# between files of the same group.
unity=-DCMAKE_UNITY_BUILD=ON

# AddressSanitizer + UndefinedBehaviorSanitizer over the whole suite. Options:
# - abort_on_error / halt_on_error: a report ends the process non-zero, so its test fails;
# - LeakSanitizer stays on, with suppressions only for allocations made inside Open MPI
#   and the libraries it loads (lsan.supp says why); leaks in ringtrain's code are reported;
# - detect_stack_use_after_return stays at GCC's default (off): oneDNN's JIT kernels move
#   the stack pointer into the heap (design.md, Signals), which the fake stack would misread.
if ((run_asan)); then
  asan=${RINGTRAIN_ASAN_BUILD_DIR:-$root/build-asan}
  RINGTRAIN_BUILD_DIR=$asan CMAKE_BUILD_TYPE=Release \
    RINGTRAIN_CMAKE_ARGS="-DRINGTRAIN_SANITIZE=address,undefined $unity" "$root/scripts/build.sh"
  (
    cd "$asan"
    # Open MPI's components are dlopen()ed and MPI_Finalize unloads them, so the leak stacks
    # of their never-freed state were "<unknown module>" frames that no suppression could
    # name. test/sanitizers/keep_loaded.c, preloaded, makes dlclose() a no-op: the modules
    # stay mapped and lsan.supp matches them by name, with the fast frame-pointer unwinder
    # (the exact unwinder, fast_unwind_on_malloc=0, had made the MPI tests 2x slower).
    # verify_asan_link_order=0: the shim comes before libasan in the link order. Harmless:
    # it defines only dlclose, whose ASan interceptor would only note unloaded modules.
    cc -shared -fPIC -O2 -o "$asan/libkeep_loaded.so" "$supp/keep_loaded.c"
    export LD_PRELOAD=$asan/libkeep_loaded.so
    export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_string_checks=1:check_initialization_order=1:verify_asan_link_order=0"
    export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
    ctest --output-on-failure -j "$jobs" -LE "^(heavy|wide|emulated_nodes|scripts_only)$" "${args[@]}"
  ) || status=1
fi

# ThreadSanitizer over the tests that start threads (label `threads`): only the
# executables those tests run are built.
if ((run_tsan)); then
  tsan=${RINGTRAIN_TSAN_BUILD_DIR:-$root/build-tsan}
  cmake -S "$root" -B "$tsan" -DCMAKE_BUILD_TYPE=Release -DRINGTRAIN_SANITIZE=thread "$unity" >/dev/null
  targets=$(cd "$tsan" && ctest -L threads -LE '^wide$' --show-only=json-v1 | /usr/bin/python3 -c '
import json, os, sys
build = sys.argv[1]
names = set()
for t in json.load(sys.stdin)["tests"]:
    # ctest names no command for an executable that is not built yet: those are the
    # ringtrain_test() ones, whose executable is named after the test.
    command = t.get("command")
    if command is None:
        names.add(t["name"])
        continue
    for arg in command:
        if arg.startswith(build + "/"):
            names.add(os.path.basename(arg))
print(" ".join(sorted(names)))' "$tsan")
  if [[ -n $targets ]]; then
    cmake --build "$tsan" -j "${RINGTRAIN_JOBS:-$(nproc)}" --target $targets
    (
      cd "$tsan"
      export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp"
      ctest --output-on-failure -j "$jobs" -L threads -LE '^wide$' "${args[@]}"
    ) || status=1
  fi
fi
exit $status
