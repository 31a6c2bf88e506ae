#!/usr/bin/env bash
# Do two ringtrain binaries train to the same bits? Trains every sequential zoo model for a
# few steps on small synthetic data with each binary in turn (same flags, same seed) and
# compares the final checkpoints' parameter, buffer and optimizer sections byte for byte and
# their model signatures; lenet5 also at np 2. Written to show that models as layer graphs
# left the chain models unchanged (build the old binary in a scratch worktree:
# git worktree add /tmp/old <commit> && cmake ... --target ringtrain).
#   scripts/same_bits.sh OLD_BINARY NEW_BINARY [STEPS]
# Prints one line per case and exits 1 if any case differs. Not a CI test: it needs two builds.
set -euo pipefail
if [[ $# -lt 2 || ! -x $1 || ! -x $2 ]]; then
  echo "usage: $0 OLD_BINARY NEW_BINARY [STEPS]  (both executable ringtrain binaries)" >&2
  exit 2
fi
old=$1 new=$2 steps=${3:-4}
[[ $steps =~ ^[1-9][0-9]*$ ]] || { echo "$0: STEPS must be a positive integer, got '$steps'" >&2; exit 2; }
work=$(mktemp -d /tmp/same_bits.XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
mpi=(mpirun --oversubscribe --bind-to none)

# Sections of a checkpoint as "name sha256" lines plus the model signature from its metadata.
digest() {
  python3 - "$1" <<'PY'
import hashlib, json, struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"RINGTRCK", "not a checkpoint"
count = struct.unpack_from("<I", b, 12)[0]
for i in range(count):
    name, off, size, _crc, _ = struct.unpack_from("<16sQQII", b, 16 + 40 * i)
    name = name.rstrip(b"\0").decode()
    data = b[off:off + size]
    if name == "meta":
        print("signature", hashlib.sha256(json.loads(data)["signature"].encode()).hexdigest())
    else:
        print(name, hashlib.sha256(data).hexdigest(), size // 4, "floats")
PY
}

fail=0
run_case() {  # name np shape model
  local name=$1 np=$2 shape=$3 model=$4
  local flags=(train --dataset synthetic --synthetic-shape "$shape" --synthetic-train 96 --synthetic-test 32
    --model "$model" --batch-size 8 --epochs 1 --max-steps "$steps" --seed 5 --quiet)
  for which in old new; do
    local bin=$old
    [[ $which == new ]] && bin=$new
    if ! "${mpi[@]}" -np "$np" "$bin" "${flags[@]}" --run-dir "$work/$name.$which" > "$work/$name.$which.log" 2>&1; then
      echo "$name: the $which binary failed:"; cat "$work/$name.$which.log"; fail=1; return
    fi
    digest "$work/$name.$which/model.rtck" > "$work/$name.$which.digest"
  done
  if cmp -s "$work/$name.old.digest" "$work/$name.new.digest"; then
    echo "$name: same bits ($(grep '^params' "$work/$name.new.digest" | cut -d' ' -f3) parameters, $steps steps)"
  else
    echo "$name: DIFFERENT"; diff "$work/$name.old.digest" "$work/$name.new.digest" || true; fail=1
  fi
}

run_case logreg 1 1x28x28 logreg
run_case mlp 1 1x28x28 mlp
run_case lenet5 1 1x28x28 lenet5
run_case lenet5-np2 2 1x28x28 lenet5
run_case svhn-cnn 1 3x32x32 svhn-cnn
run_case alexnet 1 3x32x32 alexnet
run_case vgg11 1 3x32x32 vgg11
exit $fail
