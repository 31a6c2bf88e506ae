# Cases of cli_test.sh (sourced by it; the variables and helpers are its own).
# Bad input: config mismatch, corrupt and foreign checkpoints, NaN loss, usage errors, sizes beyond memory, a full disk, a torn log.
# shellcheck shell=bash disable=SC2154

case_config_mismatch() {
  mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -np 1 "$bin" train "${data[@]}" --epochs 1 --lr 0.1 \
    --run-dir "$work/m" : -np 1 "$bin" train "${data[@]}" --epochs 1 --lr 0.2 --run-dir "$work/m" > "$work/log" 2>&1
  expect_fail "$work/log" nonzero "rank\\(s\\) 1 disagree with rank 0" 2 $?
}

case_corrupt_checkpoint() {
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 1 --checkpoint-every 1 --run-dir "$work/c" || fail "training failed"
  ck=$(ls "$work/c/checkpoints"/ckpt-*.rtck | tail -1)
  cp "$ck" "$work/flipped.rtck"
  size=$(stat -c %s "$ck")
  printf '\xff' | dd of="$work/flipped.rtck" bs=1 seek=$((size - 100)) conv=notrunc status=none
  cp "$work/flipped.rtck" "$work/flipped.orig"
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 2 --resume "$work/flipped.rtck" --run-dir "$work/c2" > "$work/log" 2>&1
  expect_fail "$work/log" nonzero "flipped.rtck: optimizer: CRC32 mismatch" 2 $?
  cmp -s "$work/flipped.rtck" "$work/flipped.orig" || fail "the corrupt checkpoint was modified"
  head -c $((size / 2)) "$ck" > "$work/truncated.rtck"
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 2 --resume "$work/truncated.rtck" --run-dir "$work/c3" > "$work/log" 2>&1
  expect_fail "$work/log" nonzero "truncated.rtck: .*truncated" 2 $?
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --model logreg --epochs 2 --resume "$ck" --run-dir "$work/c4" > "$work/log" 2>&1
  expect_fail "$work/log" nonzero "checkpoint is of model 'lenet5'" 2 $?
  "$bin" inspect "$work/flipped.rtck" > "$work/log" 2>&1
  code=$?
  [[ $code -eq 1 ]] && grep -q "CRC32 mismatch" "$work/log" || fail "inspect of a corrupt checkpoint: exit $code"
}

case_nan() {
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 3 --lr 1e30 --run-dir "$work/n" > "$work/log" 2>&1
  expect_fail "$work/log" nonzero "loss became (NaN|Inf) at step [0-9]+" 2 $?
}

case_usage() {
  "$bin" train --epochs -3 > "$work/log" 2>&1; code=$?
  [[ $code -eq 2 ]] || fail "--epochs -3: exit $code, expected 2"
  "$bin" train --no-such-flag > "$work/log" 2>&1; code=$?
  [[ $code -eq 2 ]] && grep -q "no-such-flag" "$work/log" || fail "unknown flag: exit $code"
  "$bin" train --snapshot-every -1 --dataset synthetic --quiet > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" 2 "--snapshot-every must be >= 0" 1 $code
  "$bin" train --snapshot-every 5 --mode async --dataset synthetic --quiet > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" 2 "--snapshot-every applies to --mode sync" 1 $code
  "$bin" train --model resnet999 --dataset synthetic --quiet > "$work/log" 2>&1; code=$?
  [[ $code -eq 2 ]] && grep -q "resnet999" "$work/log" || { cat "$work/log"; fail "unknown model: exit $code"; }
  # models: torchvision's parameter counts at 224x224, and bad sizes named by their flag.
  "$bin" models --input 3x224x224 --classes 1000 > "$work/models" || fail "models --input 3x224x224 exited non-zero"
  for want in "^resnet18 .* 11689512 " "^resnet50 .* 25557032 " "^mobilenetv2 .* 3504872 "; do
    grep -q -- "$want" "$work/models" || { cat "$work/models"; fail "models at 224x224 lacks '$want'"; }
  done
  "$bin" models --model resnet18 --input 3x16x16 > "$work/log" 2>&1; code=$?
  one_line_error "$work/log" $code 2 "--input 3x16x16: model resnet18"
  "$bin" models --classes 1 > "$work/log" 2>&1; code=$?
  [[ $code -eq 2 ]] && grep -q -- "--classes" "$work/log" || { cat "$work/log"; fail "models --classes 1: exit $code"; }
  # models --plan: resnet20's fusions, reorders and planned memory; unfused on request.
  "$bin" models --model resnet20 --plan --plan-batch 2 > "$work/plan" || fail "models --plan exited non-zero"
  for want in "^plan resnet20 input 1x28x28 batch 2 train fp32, fusions on" "relu1 .* runs in bn1" \
      "^fused: 10 batch norm + ReLU, 0 convolution + ReLU, 9 add + ReLU" "^reorders per step: " "planned by liveness"; do
    grep -q -- "$want" "$work/plan" || { cat "$work/plan"; fail "models --plan lacks '$want'"; }
  done
  "$bin" models --model resnet20 --plan --plan-batch 2 --no-fusions > "$work/plan" || fail "--no-fusions exited non-zero"
  grep -q "^fused: 0 batch norm + ReLU" "$work/plan" || { cat "$work/plan"; fail "models --plan --no-fusions fused"; }
  "$bin" models --model resnet20 --plan --plan-batch 0 > "$work/log" 2>&1; code=$?
  [[ $code -eq 2 ]] && grep -q -- "--plan-batch" "$work/log" || { cat "$work/log"; fail "--plan-batch 0: exit $code"; }
  "$bin" train --data-dir /nonexistent/data > "$work/log" 2>&1; code=$?
  [[ $code -ne 0 ]] && grep -q "/nonexistent/data" "$work/log" || { cat "$work/log"; fail "missing data: exit $code"; }
  "${mpi[@]}" -np 3 "$bin" train "${data[@]}" --global-batch-size 32 > "$work/log" 2>&1; code=$?
  [[ $code -ne 0 ]] && grep -q "not divisible by the 3 ranks" "$work/log" || { cat "$work/log"; fail "global batch: exit $code"; }
  # Captured first: grep -q closing a pipe early would SIGPIPE the writer under pipefail.
  "$bin" --help > "$work/help" || fail "--help exited non-zero"
  grep -q "train" "$work/help" || fail "--help does not list train"
  "$bin" train --help > "$work/help" || fail "train --help exited non-zero"
  grep -q -- "--allreduce" "$work/help" || fail "train --help does not list --allreduce"
  # No CLI11 leftovers ({false} after negated flags, a validator's [-1 - 1073741824]), and
  # the footer on exit codes, signals and threads.
  ! grep -qE -- '\{false\}|\[-1 - ' "$work/help" || fail "train --help shows CLI11 leftovers: $(grep -E -- '\{false\}|\[-1 - ' "$work/help")"
  for want in "^Exit status:" "^  75  stopped by a signal" "^Signals: SIGTERM" "^Threads: " "--threads INT" "--log-every INT=10"; do
    grep -q -- "$want" "$work/help" || fail "train --help lacks '$want'"
  done
  # Bounds read as a person writes them, in --help and in the usage error (CLI11's own Range
  # printed a double's limits: "Value -3 not in range 0.000000 to 1797693..."), also through a
  # config file; a value that is no number says so.
  for want in "--stall-timeout FLOAT:(>= 0)=600" "--servers INT:(>= 1)=1" "--synthetic-classes INT:(from 2 to 256)=10"; do
    grep -qF -- "$want" "$work/help" || fail "train --help lacks '$want'"
  done
  ! grep -qE '0\.000000|[0-9]{20}' "$work/help" || fail "train --help shows a double's limits"
  for args in "--stall-timeout -3|--stall-timeout: must be >= 0 (got -3)" \
              "--stall-timeout x|--stall-timeout: must be a number >= 0 (got 'x')" \
              "--mode async --servers 0|--servers: must be >= 1 (got 0)" \
              "--synthetic-classes 1|--synthetic-classes: must be from 2 to 256 (got 1)" \
              "--synthetic-classes 1000|--synthetic-classes: must be from 2 to 256 (got 1000)"; do
    read -ra flags <<<"${args%%|*}"
    "$bin" train "${flags[@]}" > "$work/log" 2>&1; code=$?
    [[ $code -eq 2 ]] && grep -qxF "ringtrain: usage error: ${args#*|}" "$work/log" \
      || { cat "$work/log" >&2; fail "${args%%|*}: exit $code, expected 2 and '${args#*|}'"; }
  done
  "$bin" eval --checkpoint none.rtck --batch-size 0 > "$work/log" 2>&1; code=$?
  [[ $code -eq 2 ]] && grep -qF -- "--batch-size: must be >= 1 (got 0)" "$work/log" || { cat "$work/log" >&2; fail "eval --batch-size 0: exit $code"; }
  printf 'stall-warning = -1\n' > "$work/bound.toml"
  "$bin" train --config "$work/bound.toml" > "$work/log" 2>&1; code=$?
  [[ $code -eq 2 ]] && grep -qF "key 'stall-warning': --stall-warning: must be >= 0 (got -1)" "$work/log" \
    || { cat "$work/log" >&2; fail "stall-warning = -1 in a config file: exit $code"; }
  # A run's config.json given to --config: exit 2, one line pointing at config.toml.
  echo '{"epochs": 1}' > "$work/c.json"
  "$bin" train --config "$work/c.json" > "$work/log" 2>&1
  code=$?
  [[ $code -eq 2 && $(wc -l < "$work/log") -eq 1 ]] && grep -q "JSON is not read.*config.toml" "$work/log" \
    || { cat "$work/log" >&2; fail "--config x.json: exit $code"; }
}

case_bad_checkpoints() {
  # Every bad checkpoint: exit 1 or 2, a one-line error naming the file, nothing written.
  "${mpi[@]}" -np 1 "$bin" train "${data[@]}" --epochs 1 --checkpoint-every 1 --run-dir "$work/b" || fail "training failed"
  ck=$(ls "$work/b/checkpoints"/ckpt-*.rtck | tail -1)
  mkdir -p "$work/dir.rtck"
  "$bin" inspect "$work/dir.rtck" > "$work/log" 2>&1; one_line_error "$work/log" $? 1 "dir.rtck: is a directory"
  "${mpi[@]}" -np 2 "$bin" eval --checkpoint "$work/dir.rtck" > "$work/log" 2>&1
  expect_fail "$work/log" nonzero "dir.rtck: is a directory" 2 $?
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 2 --resume "$work/dir.rtck" --run-dir "$work/b2" > "$work/log" 2>&1
  expect_fail "$work/log" nonzero "dir.rtck: is a directory" 2 $?
  # Damaged metadata with valid checksums: rebuilt by the format's own rules.
  damage() {  # damage <in> <out> <python expression that edits the dict m>
    $py - "$1" "$2" "$3" <<'PY'
import json, struct, sys, zlib
src, dst, edit = sys.argv[1:]
b = open(src, "rb").read()
count = struct.unpack_from("<I", b, 12)[0]
secs = []
for i in range(count):
    e = 16 + 40 * i
    name = b[e:e + 16]
    off, size = struct.unpack_from("<QQ", b, e + 16)
    secs.append([name, b[off:off + size]])
m = json.loads(secs[0][1])
exec(edit)
secs[0][1] = json.dumps(m).encode()
head = bytearray(b[:16])
off = 16 + 40 * count + 4
for name, payload in secs:
    head += name + struct.pack("<QQII", off, len(payload), zlib.crc32(payload), 0)
    off += len(payload)
head += struct.pack("<I", zlib.crc32(bytes(head)))
open(dst, "wb").write(bytes(head) + b"".join(p for _, p in secs))
PY
  }
  damage "$ck" "$work/same.rtck" "pass"
  "$bin" inspect "$work/same.rtck" > /dev/null || fail "the checkpoint rebuilt unchanged does not load"
  i=0
  for edit_and_pattern in \
      "del m['epoch']|key 'epoch': expected an integer .*the key is missing" \
      "m['epoch'] = 'three'|key 'epoch': expected an integer" \
      "m['step_in_epoch'] = -1000|key 'step_in_epoch': expected an integer in \\[0, [0-9]+\\], got -1000" \
      "m['epoch'] = 2**31|key 'epoch': .*got 2147483648" \
      "m['config']['dataset'] = 'imagenet'|key 'config.dataset': expected one of" \
      "m['config']['synthetic_train'] = 10**12|key 'config.synthetic_train': expected a sample count"; do
    i=$((i + 1))
    edit=${edit_and_pattern%%|*}
    pattern=${edit_and_pattern#*|}
    damage "$ck" "$work/m$i.rtck" "$edit"
    cp "$work/m$i.rtck" "$work/m$i.orig"
    "$bin" inspect "$work/m$i.rtck" > "$work/log" 2>&1; one_line_error "$work/log" $? 1 "m$i.rtck: meta: $pattern"
    # The same validation serves eval and resume: two cases under mpirun keep this short.
    if [[ $i -eq 1 || $i -eq 6 ]]; then
    "${mpi[@]}" -np 2 "$bin" eval --checkpoint "$work/m$i.rtck" > "$work/log" 2>&1
    expect_fail "$work/log" nonzero "m$i.rtck: meta: $pattern" 2 $?
    "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 2 --resume "$work/m$i.rtck" --run-dir "$work/r$i" > "$work/log" 2>&1
    expect_fail "$work/log" nonzero "m$i.rtck: meta: $pattern" 2 $?
    fi
    cmp -s "$work/m$i.rtck" "$work/m$i.orig" || fail "m$i.rtck was modified"
  done
  cat "$ck" > "$work/trailing.rtck"; printf 'xyz' >> "$work/trailing.rtck"
  "$bin" inspect "$work/trailing.rtck" > "$work/log" 2>&1
  one_line_error "$work/log" $? 1 "trailing.rtck: trailer: 3 unexpected bytes after the last section"
  "${mpi[@]}" -np 1 "$bin" eval --checkpoint "$ck" --batch-size 2000000000 > "$work/log" 2>&1
  expect_fail "$work/log" 2 "--batch-size 2000000000 .* needs 6.27 TB" 1 $?
}

case_bad_sizes() {
  # Sizes checked up front, naming the flag and the memory (not a bare std::bad_alloc).
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --synthetic-train 1000000000000 --run-dir "$work/big" > "$work/log" 2>&1
  expect_fail "$work/log" 2 "--synthetic-train 1000000000000 .* needs 785 TB, more than this machine's" 2 $?
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --eval-batch-size 2000000000 --run-dir "$work/big" > "$work/log" 2>&1
  expect_fail "$work/log" 2 "--eval-batch-size 2000000000 .* needs 6.27 TB" 2 $?
  [[ ! -e $work/big ]] || fail "a refused run created its run directory"
  "$bin" trian --epochs 1 > "$work/log" 2>&1; code=$?
  [[ $code -eq 2 ]] && grep -q "unknown command 'trian'" "$work/log" || { cat "$work/log"; fail "unknown command: exit $code"; }
}

case_full_disk() {
  # A full disk under a log: the run ends with an error naming the file (never goes on
  # with logs that silently stopped). /dev/full fails every write with ENOSPC.
  mkdir -p "$work/f1" "$work/f2"
  ln -s /dev/full "$work/f1/metrics.csv"
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 1 --run-dir "$work/f1" > "$work/log" 2>&1; code=$?
  [[ $code -ne 0 ]] && grep -qE "error: .*f1/metrics.csv: write failed: No space left" "$work/log" \
    || { cat "$work/log" >&2; fail "full metrics.csv: exit $code"; }
  ln -s /dev/full "$work/f2/rank-1.jsonl"
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 1 --run-dir "$work/f2" > "$work/log" 2>&1; code=$?
  [[ $code -ne 0 ]] && grep -qE "\[rank 1\] error: .*f2/rank-1.jsonl: write failed: No space left" "$work/log" \
    || { cat "$work/log" >&2; fail "full rank-1.jsonl: exit $code"; }
  [[ ! -e $work/f2/summary.json && ! -e $work/f2/summary.json.tmp ]] || fail "summary.json written after a failed log"
}

case_torn_log() {
  # A rank killed mid-record leaves a torn last line: trace and the report read the rest
  # and warn; a bad line inside a log is still an error naming file and line.
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 1 --run-dir "$work/t" || fail "training failed"
  printf '{"type":"step","t":1.5,"data_s":0.0' >> "$work/t/rank-1.jsonl"
  lines=$(wc -l < "$work/t/rank-1.jsonl")
  "$bin" trace "$work/t" > "$work/log" 2>&1 || { cat "$work/log" >&2; fail "trace rejected a torn last line"; }
  grep -q "warning: .*rank-1.jsonl:$((lines + 1)): ignoring the truncated last line" "$work/log" \
    || { cat "$work/log" >&2; fail "trace did not warn about the torn line"; }
  [[ -s $work/t/trace.json ]] || fail "no trace.json"
  MPLBACKEND=Agg $py "$(dirname "$0")/../../scripts/plot/run_report.py" "$work/t" > "$work/log" 2>&1 \
    || { cat "$work/log" >&2; fail "run_report.py rejected a torn last line"; }
  grep -q "rank-1.jsonl:$((lines + 1)): ignoring the truncated last line" "$work/log" || fail "run_report.py did not warn"
  # Resuming appends after the torn line only once it is cut away.
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 1 --run-dir "$work/t2" --checkpoint-every 1 || fail "training failed"
  printf '{"type":"st' >> "$work/t2/rank-0.jsonl"
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 2 --run-dir "$work/t2" --resume auto || fail "resume failed"
  "$bin" trace "$work/t2" > "$work/log" 2>&1 || { cat "$work/log" >&2; fail "trace after resume"; }
  grep -q "warning" "$work/log" && { cat "$work/log" >&2; fail "the resumed log still holds the torn line"; }
  grep -q "dropped the torn last line" "$work/t2/rank-0.jsonl" || fail "no event about the dropped line"
  # A damaged line inside a log stays an error.
  sed -i '2s/.*/{"type":/' "$work/t/rank-0.jsonl"
  "$bin" trace "$work/t" > "$work/log" 2>&1; code=$?
  [[ $code -eq 1 ]] && grep -q "rank-0.jsonl:2:" "$work/log" || { cat "$work/log" >&2; fail "bad inner line: exit $code"; }
}
