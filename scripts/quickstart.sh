#!/usr/bin/env bash
# Set up, build, then train LeNet-5 on the built-in Fashion-MNIST with 2 data-parallel
# ranks under mpirun. Extra arguments go to `ringtrain train` (e.g. --epochs 10).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
build=${RINGTRAIN_BUILD_DIR:-$root/build}

np=${RINGTRAIN_NP:-2}
cores=$(nproc)
threads=$(( cores / np > 0 ? cores / np : 1 ))
# Ctrl-C: mpirun passes SIGINT on to the ranks as SIGTERM after odls_base_sigkill_timeout
# seconds and SIGKILLs them as long again (1 s by default, too short for the step and its
# checkpoint); 10 s keeps Ctrl-C prompt and leaves them time.
mpi_args=(-np "$np" -x OMP_NUM_THREADS="$threads" --bind-to none --mca odls_base_sigkill_timeout 10)
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
if (( np > cores )); then
  mpi_args+=(--oversubscribe)
fi
export OMP_NUM_THREADS=$threads

# Under mpirun a rank's stderr is a pipe, so ringtrain cannot see the terminal itself.
progress=plain
if [[ -t 2 ]]; then progress=bar; fi

cd "$root"
set -x
mpirun "${mpi_args[@]}" "$build/apps/ringtrain" train --model lenet5 --dataset fashion-mnist --epochs 5 \
  --progress "$progress" "$@"
