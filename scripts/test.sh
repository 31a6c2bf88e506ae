#!/usr/bin/env bash
# Set up, build and run the whole test suite with ctest. Non-zero on any failure.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
build=${RINGTRAIN_BUILD_DIR:-$root/build}
# Open MPI refuses to run as root unless told; CI runs as root. run.sh knows the variables.
# shellcheck source=mpirun/run.sh
source "$root/scripts/mpirun/run.sh"
mpirun_root_env
if ((${#MPIRUN_ROOT_ENV[@]})); then
  export "${MPIRUN_ROOT_ENV[@]}"
fi
cd "$build"
ctest --output-on-failure -j "${RINGTRAIN_TEST_JOBS:-2}" "$@"
