#!/usr/bin/env bash
# ringtrain vs PyTorch 1.13 training throughput and peak memory on the same CPU work, as
# ratios measured in the same run. Logic lives in compare.py; see --help.
#
#   scripts/bench/train_throughput.sh                          # logreg, mlp, lenet5; np 1
#   scripts/bench/train_throughput.sh --models lenet5,mlp,vgg11 --np 2 --out bench.md
#   scripts/bench/train_throughput.sh --bin build/apps/ringtrain --repeats 5 --steps 100
#   RINGTRAIN_CLUSTER_ID=3 scripts/bench/train_throughput.sh --cluster 2 --link-rate 1gbit --models mlp,vgg11 \
#       --batch mlp=64 --out docs/benchmarks/train-throughput-cluster.md   # vs DDP across emulated nodes (root)
#
# PyTorch: apt-get install python3-torch libopenblas0-openmp (Debian's 1.13, CPU). Without it
# the script prints ringtrain-only figures; without the ringtrain binary, PyTorch-only ones.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Debian's interpreter: the python3 on PATH may be a pyenv one without Debian's packages.
python=${RINGTRAIN_BENCH_PYTHON:-/usr/bin/python3}
if [[ ! -x $python ]]; then
  echo "train_throughput.sh: $python not found (set RINGTRAIN_BENCH_PYTHON)" >&2
  exit 2
fi
exec "$python" "$here/compare.py" --python "$python" "$@"
