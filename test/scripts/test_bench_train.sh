#!/usr/bin/env bash
# apps/peak_gflops and `bench.py train`'s use of it, without torch: the program's JSON line and
# usage error, and a ringtrain-only round whose report states the peak and a % of peak for the
# model; and one round of `bench.py onnx-train`, whose row holds both of its ratios. Figures are never compared with anything: only their presence and form.
# usage: test_bench_train.sh RINGTRAIN PEAK_GFLOPS
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
bin=$1 peak=$2
export MPLBACKEND=Agg

"$peak" --n 128 --repeats 2 --json > "$tmp/peak" 2>&1 || fail "peak_gflops --json: $(cat "$tmp/peak")"
/usr/bin/python3 -c 'import json, sys
d = json.loads(open(sys.argv[1]).read())
assert d["n"] == 128 and d["threads"] == 1 and d["repeats"] == 2 and d["gflops"] > 0 and d["cpu_per_wall"] > 0, d' \
  "$tmp/peak" || fail "peak_gflops --json printed $(cat "$tmp/peak")"
"$peak" --n 10 > "$tmp/log" 2>&1; code=$?
[[ $code == 2 ]] && grep -qF -- "--n: must be from 64 to 16384 (got 10)" "$tmp/log" || fail "--n 10: exit $code $(cat "$tmp/log")"

# One round of lenet5 (its FLOPs come from the layer spec, no torch needed), ringtrain alone.
/usr/bin/python3 "$here/../../scripts/bench/bench.py" train --models lenet5 --no-peer --rounds 1 --steps 5 --warmup 1 \
  --bin "$bin" --peak-bin "$peak" --out "$tmp/out" > "$tmp/log" 2>&1 || fail "bench.py train: $(tail -5 "$tmp/log")"
grep -qE "one core's peak: oneDNN sgemm 2048\^3, one thread, best of before and after the rounds: [0-9.]+ GFLOP/s" \
  "$tmp/out/report.md" || fail "the report does not state the peak: $(head -3 "$tmp/out/report.md")"
# The row: model, precision, batch, steps, MFLOP/img, img/s, (no PyTorch), (no ratio), % of peak.
grep -qE '^\| lenet5 \| fp32 \| 64 \| 5 \| 2\.26 \| [0-9,.]+ \|  \|  \| [0-9]+ \|' "$tmp/out/report.md" ||
  fail "no % of peak in lenet5's row: $(grep lenet5 "$tmp/out/report.md")"

# bench.py onnx-train (it shares train's runs): one lenet5 round, both ratios in the row.
/usr/bin/python3 "$here/../../scripts/bench/bench.py" onnx-train --models lenet5 --rounds 1 --steps 5 --warmup 1 \
  --bin "$bin" --out "$tmp/onnx" > "$tmp/log" 2>&1 || fail "bench.py onnx-train: $(tail -5 "$tmp/log")"
grep -qE '^\| lenet5 \| fp32 \| 64 \| 5 \| [0-9,.]+ \| [0-9,.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$' "$tmp/onnx/report.md" ||
  fail "onnx-train's row: $(grep lenet5 "$tmp/onnx/report.md")"
finish test_bench_train "$tmp/log"
