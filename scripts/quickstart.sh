#!/usr/bin/env bash
# Set up, build, then train LeNet-5 on the built-in Fashion-MNIST with 2 data-parallel
# ranks under mpirun. Extra arguments go to `ringtrain train` (e.g. --epochs 10). Ends by
# pointing at the trained model, <run-dir>/model.rtck, and the commands that read it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
build=${RINGTRAIN_BUILD_DIR:-$root/build}

np=${RINGTRAIN_NP:-2}

# Under mpirun a rank's stderr is a pipe, so ringtrain cannot see the terminal itself.
progress=plain
if [[ -t 2 ]]; then progress=bar; fi

# The run directory, so that the end can point at the model: --run-dir when given (the
# last one wins, as in ringtrain), else runs/quickstart-<time>.
run_dir=runs/quickstart-$(date +%Y%m%d-%H%M%S)
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    --run-dir) ((i + 1 < ${#args[@]})) && run_dir=${args[i + 1]} ;;
    --run-dir=*) run_dir=${args[i]#--run-dir=} ;;
  esac
done

# run.sh: the cores shared out as threads per rank, the root-only Open MPI variables,
# --oversubscribe past the core count; unbound, as ranks of a laptop-sized run share cores.
cd "$root"
set -x
scripts/mpirun/run.sh -np "$np" --no-bind --bin "$build/apps/ringtrain" -- train --model lenet5 \
  --dataset fashion-mnist --epochs 5 --progress "$progress" --run-dir "$run_dir" "$@"
{ set +x; } 2>/dev/null

# A stopped run (exit 75) or a failed one has ended the script above (set -e).
[[ $run_dir == /* ]] || run_dir=$root/$run_dir
cat <<EOF_DONE

The trained model: $run_dir/model.rtck (its logs and metrics: $run_dir/).
Evaluate it on the test set:   $build/apps/ringtrain eval --checkpoint $run_dir/model.rtck
Its header:                    $build/apps/ringtrain inspect $run_dir/model.rtck
As ONNX:                       $build/apps/ringtrain export --checkpoint $run_dir/model.rtck --onnx $run_dir/model.onnx
EOF_DONE
