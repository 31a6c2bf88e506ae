#!/usr/bin/env bash
# Configure and build ringtrain (Release) into build/ (or $RINGTRAIN_BUILD_DIR).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${RINGTRAIN_BUILD_DIR:-$root/build}
jobs=${RINGTRAIN_JOBS:-$(nproc)}
# RINGTRAIN_CMAKE_ARGS: extra configure options (scripts/test.sh --sanitize passes the
# sanitizer choice this way).
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" ${RINGTRAIN_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j "$jobs"
