#!/usr/bin/env bash
# The plumbing of `bench.py tta` and `bench.py throughput` at toy scale, without torch: the
# folder written on first use (make_image_folder), the commands of both sides (--dry-run), the
# usage errors, and ringtrain-only rounds on this host whose report and results.csv hold the
# run's figures (an interpreter without torch stands in for the peer: the suite must say so and
# measure ringtrain alone). Figures are never compared with anything: only their presence.
# usage: test_bench_folder.sh RINGTRAIN MAKE_IMAGE_FOLDER
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
bin=$1
export RINGTRAIN_MAKE_IMAGE_FOLDER=$2 MPLBACKEND=Agg
bench() { /usr/bin/python3 "$here/../../scripts/bench/bench.py" "$@"; }
# A "python" without torch: every import fails, so the peer counts as not installed.
printf '#!/bin/sh\nexit 1\n' > "$tmp/no-torch" && chmod +x "$tmp/no-torch"

# --dry-run: both sides' commands with the same recipe, nothing run; the folder is only named.
bench tta --dry-run --bin "$bin" --data-dir "$tmp/none" --where host,nodes > "$tmp/dry" 2>&1 || fail "tta --dry-run: $(tail -3 "$tmp/dry")"
grep -q "make_image_folder fashion $tmp/none.partial 60000 10000" "$tmp/dry" || fail "dry run does not name the folder's writer"
[[ ! -e $tmp/none ]] || fail "--dry-run wrote the folder"
for side in "ringtrain train --model resnet20 --dataset folder --data-dir $tmp/none --crop random-resized:28 --crop-scale 0.35,1" \
  "torch_folder_peer.py --data-dir $tmp/none --model resnet20 --channels 1 --size 28 --crop-scale 0.35,1" \
  "cluster.sh run --np 2"; do
  grep -qF -- "$side" "$tmp/dry" || fail "dry run lacks '$side'"
done
[[ $(grep -c -- "--target-accuracy 0.92" "$tmp/dry") == 4 ]] || fail "every command of the dry run needs --target-accuracy 0.92"

# Usage errors: exit 2 and one line naming the flag.
bench tta --dataset packed --bin "$bin" --data-dir "$tmp/none" --dry-run > "$tmp/log" 2>&1; code=$?
[[ $code == 2 ]] && grep -q -- "--dataset packed needs --packed-dir" "$tmp/log" || fail "packed without --packed-dir: exit $code $(tail -1 "$tmp/log")"
bench throughput --where moon --bin "$bin" --data-dir "$tmp/none" --dry-run > "$tmp/log" 2>&1; code=$?
[[ $code == 2 ]] && grep -q "moon" "$tmp/log" || fail "--where moon: exit $code $(tail -1 "$tmp/log")"

mkdir -p "$tmp/flat/c0"  # a folder without train/: refused, nothing written into it
bench tta --no-peer --where host --bin "$bin" --data-dir "$tmp/flat" > "$tmp/log" 2>&1; code=$?
[[ $code == 1 ]] && grep -q "flat: no train/ in it" "$tmp/log" && [[ ! -e $tmp/flat.partial && $(ls "$tmp/flat") == c0 ]] ||
  fail "a folder without train/: exit $code $(tail -1 "$tmp/log")"

# Time to accuracy, ringtrain alone: the folder is written on first use, the target (any
# accuracy above 0.1%) is reached in the one epoch, and the report and CSV say so.
RINGTRAIN_BENCH_PYTHON=$tmp/no-torch bench tta --where host --bin "$bin" --data-dir "$tmp/fm" --train-images 128 \
  --val-images 64 --epochs 1 --batch 16 --target 0.001 --rounds 1 --out "$tmp/tta" > "$tmp/tta.log" 2>&1 ||
  fail "tta ringtrain alone: $(tail -5 "$tmp/tta.log")"
[[ $(find "$tmp/fm/train" -name '*.png' | wc -l) == 128 && $(find "$tmp/fm/val" -name '*.png' | wc -l) == 64 ]] ||
  fail "the written folder should hold 128 + 64 PNGs"
[[ ! -e $tmp/fm.partial ]] || fail "the partial folder was left behind"
grep -q "the PyTorch peer is not installed" "$tmp/tta.log" || fail "no note that the peer is missing"
grep -qE '^\| host \| fp32 \| ringtrain \| 1/1 \| [0-9.]+ \| [0-9.]+ \| 1 \| [0-9.]+ \|' "$tmp/tta/report.md" ||
  fail "tta report row: $(grep ringtrain "$tmp/tta/report.md")"
grep -q "pytorch" "$tmp/tta/report.md" && fail "a PyTorch row without the peer"
/usr/bin/python3 - "$tmp/tta/results.csv" <<'PY' || fail "tta results.csv"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 1 and rows[0]["side"] == "ringtrain", rows
r = rows[0]
assert 0 < float(r["train_s_to_target"]) <= float(r["wall_s"]), r
assert r["epochs"] == "1" and 0.001 <= float(r["accuracy"]) <= 1, r
assert 0 <= float(r["data_share"]) < 1, r
t, a = r["curve"].split(":")  # one epoch: one point of the per-epoch curve, at the final accuracy
assert 0 < float(t) <= float(r["wall_s"]) and abs(float(a) - float(r["accuracy"])) < 1e-4, r
PY

# The comparison a missed target leaves: each round's time to the best accuracy both sides
# reached, from their per-epoch curves ("seconds:accuracy" points).
PYTHONPATH="$here/../../scripts/bench" /usr/bin/python3 - <<'PY' || fail "tta common_level"
from suites.tta import common_level
rt = [{"curve": "100.0:0.8000 200.0:0.9100 300.0:0.9187"}, {"curve": ""}]
pt = [{"curve": "150.0:0.8500 320.0:0.9120 480.0:0.9130"}, {"curve": "90.0:0.5000"}]
got = common_level(rt, pt)  # round 1: both reached 0.913, at 300 s and 480 s; round 2: no ringtrain curve
assert got == [(0.913, 300.0, 480.0)], got
PY

# Throughput, ringtrain alone (--no-peer) on 2 ranks: images/s and the data wait share.
/usr/bin/python3 "$here/../../scripts/bench/bench.py" throughput --where host --no-peer --bin "$bin" \
  --data-dir "$tmp/ph" --photos synthetic --train-images 16 --val-images 4 --models resnet18 --size 32 --batch 2 --steps 2 --warmup 1 \
  --rounds 1 --out "$tmp/thr" > "$tmp/thr.log" 2>&1 || fail "throughput ringtrain alone: $(tail -5 "$tmp/thr.log")"
[[ $(find "$tmp/ph/train" -name '*.jpg' | wc -l) == 16 ]] || fail "the photo folder should hold 16 training JPEGs"
grep -qE '^\| resnet18 \| host \| fp32 \| ringtrain \| [0-9.]+ \|  \| [0-9.]+ \|' "$tmp/thr/report.md" ||
  fail "throughput report row: $(grep ringtrain "$tmp/thr/report.md")"

# make_image_folder real: crops of the given photographs, one class each named after its file,
# W..1.2W x H..1.2H with one in four per class portrait; ringtrain reads the folder.
"$2" real "$tmp/re" 8 2 64x48 "$tmp/ph/train/class0/img0000000.jpg" "$tmp/ph/train/class1/img0000001.jpg" > /dev/null ||
  fail "make_image_folder real failed"
[[ $(ls "$tmp/re/train") == $'img0000000\nimg0000001' ]] || fail "real: classes should be the photos' names: $(ls "$tmp/re/train")"
[[ $(find "$tmp/re/train" -name '*.jpg' | wc -l) == 8 && $(find "$tmp/re/val" -name '*.jpg' | wc -l) == 2 ]] ||
  fail "real: expected 8 training and 2 validation JPEGs"
"$bin" datasets --dataset folder --data-dir "$tmp/re" --crop random-resized:32 --time > "$tmp/re.log" 2>&1 || fail "real folder unreadable: $(tail -3 "$tmp/re.log")"
/usr/bin/python3 - "$tmp/re" <<'PY' || fail "real: sizes"
import struct, sys, glob
def size(path):  # (w, h) from the JPEG's SOF marker
    b = open(path, "rb").read()
    i = 2
    while i < len(b):
        marker, length = b[i + 1], struct.unpack(">H", b[i + 2:i + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            h, w = struct.unpack(">HH", b[i + 5:i + 9])
            return w, h
        i += 2 + length
sizes = sorted(size(p) for p in glob.glob(sys.argv[1] + "/train/*/*.jpg"))
land = [(w, h) for w, h in sizes if w > h]
assert all(64 <= w <= 76 and 48 <= h <= 57 for w, h in land), sizes
assert len(land) == 6 and all(48 <= w <= 57 and 64 <= h <= 76 for w, h in sizes if w < h), sizes
PY

finish test_bench_folder "$tmp/tta.log"
