#!/usr/bin/env bash
# Set up, build and run the whole test suite with ctest. Non-zero on any failure.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
build=${RINGTRAIN_BUILD_DIR:-$root/build}
# Open MPI refuses to run as root unless told; CI runs as root.
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
cd "$build"
ctest --output-on-failure -j "${RINGTRAIN_TEST_JOBS:-2}" "$@"
