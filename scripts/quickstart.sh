#!/usr/bin/env bash
# Set up, build, then train LeNet-5 on the built-in Fashion-MNIST with 2 data-parallel
# ranks under mpirun. Extra arguments go to `ringtrain train` (e.g. --epochs 10).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
build=${RINGTRAIN_BUILD_DIR:-$root/build}

np=${RINGTRAIN_NP:-2}

# Under mpirun a rank's stderr is a pipe, so ringtrain cannot see the terminal itself.
progress=plain
if [[ -t 2 ]]; then progress=bar; fi

# run.sh: the cores shared out as threads per rank, the root-only Open MPI variables,
# --oversubscribe past the core count; unbound, as ranks of a laptop-sized run share cores.
cd "$root"
set -x
scripts/mpirun/run.sh -np "$np" --no-bind --bin "$build/apps/ringtrain" -- train --model lenet5 \
  --dataset fashion-mnist --epochs 5 --progress "$progress" "$@"
