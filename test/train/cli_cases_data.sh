# Cases of cli_test.sh (sourced by it; the variables and helpers are its own).
# Data layouts: logical shards, image folders, packed shards.
# shellcheck shell=bash disable=SC2154

case_logical_shards() {
  # --logical-shards 4: the same final parameters at np 1 and np 2 (model.rtck's CRC), a
  # rank count that does not divide S refused on every rank, and the flags it excludes.
  shards=(--logical-shards 4 --batch-size 4 --max-steps 12 --threads 1 --lr-schedule constant)
  for np in 1 2; do
    "${mpi[@]}" -np $np "$bin" train "${data[@]}" "${shards[@]}" --run-dir "$work/np$np" > "$work/log$np" 2>&1 \
      || { cat "$work/log$np" >&2; fail "--logical-shards 4 at np $np failed"; }
  done
  $py -c 'import json,sys; c=json.load(open(sys.argv[1])); assert c["logical_shards"] == 4 and c["global_batch_size"] == 16, c' \
    "$work/np2/config.json" || fail "config.json lacks logical_shards 4 / global batch 16"
  a=$(params_crc "$work/np1/model.rtck") && b=$(params_crc "$work/np2/model.rtck") || fail "inspect failed"
  [[ -n $a && $a == "$b" ]] || fail "params CRC at np 1 ($a) differs from np 2 ($b)"
  # The exact sum's step records split its all-reduce: wait_s (inside MPI) + convert_s (its own
  # work) <= allreduce_s, convert_s > 0 (every step copies and converts the gradients).
  $py - "$work/np2/rank-1.jsonl" <<'PY' || fail "step records lack a consistent convert_s"
import json, sys
steps = [r for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "step"]
assert steps, "no step records"
for r in steps:
    assert r["convert_s"] > 0 and r["wait_s"] >= 0, r
    assert r["wait_s"] + r["convert_s"] <= r["allreduce_s"] + 1e-9, r
PY
  "${mpi[@]}" -np 3 "$bin" train "${data[@]}" "${shards[@]}" --run-dir "$work/np3" > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" 2 "--logical-shards 4 is not divisible by the 3 ranks" 3 $code
  [[ $(grep -c "error:" "$work/log") -eq 3 ]] || { cat "$work/log" >&2; fail "expected one error line per rank"; }
  "$bin" train "${data[@]}" --logical-shards 4 --accumulate 2 > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" 2 "--logical-shards runs each rank's shards through the accumulation path" 1 $code
  "$bin" train "${data[@]}" --logical-shards 4 --global-batch-size 30 > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" 2 "--global-batch-size 30 is not divisible by --logical-shards 4" 1 $code
}

case_folder() {
  # --dataset folder end to end (MAKE_IMAGE_FOLDER: test/images/make_image_folder): usage
  # errors exit 2 on every rank; a file of another size without --crop, and a bad image met
  # mid-epoch, end every rank with an error naming it (no hang); --bad-images skip lists it.
  "$MAKE_IMAGE_FOLDER" photos "$work/ph" 64 16 > /dev/null || fail "make_image_folder photos"
  folder=(--dataset folder --data-dir "$work/ph" --model lenet5 --batch-size 8 --epochs 1 --quiet)
  "${mpi[@]}" -np 2 "$bin" train "${folder[@]}" --crop random-resized:32 --augment > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" 2 "--augment .* --crop" 2 $code
  "${mpi[@]}" -np 2 "$bin" train "${folder[@]}" --crop 32 > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" 2 "--crop: expected random-resized:SIZE" 2 $code
  "$bin" train "${data[@]}" --crop random-resized:32 > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" 2 "--crop applies to --dataset folder or packed only" 1 $code
  "${mpi[@]}" -np 2 "$bin" train "${folder[@]}" > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" nonzero "img[0-9]+\\.jpg: [0-9]+x[0-9]+ pixels, expected 48x48" 2 $code
  "$bin" datasets --dataset folder --data-dir "$work/ph" --crop random-resized:32 --time --loader-threads 2 > "$work/log" 2>&1 \
    || { cat "$work/log"; fail "datasets --time failed"; }
  grep -qE "one epoch: 64 images decoded and augmented .* on 2 loader thread\(s\): [0-9]+ images/s" "$work/log" \
    || { cat "$work/log"; fail "datasets --time printed no rate"; }
  grep -qE "class +3 class3 +16 images" "$work/log" || { cat "$work/log"; fail "no per-class count"; }
  # A JPEG cut to 3/4 (its header intact, so the run starts): met mid-epoch by the loader
  # threads of the one rank whose shard holds it; the other hears of it at the step's agreement.
  f=$(ls "$work/ph/train/class2/" | head -1)
  p="$work/ph/train/class2/$f"
  head -c $(($(stat -c %s "$p") * 3 / 4)) "$p" > "$work/cut" && mv "$work/cut" "$p"
  "${mpi[@]}" -np 2 "$bin" train "${folder[@]}" --crop random-resized:32 --loader-threads 2 --run-dir "$work/bad" \
    > "$work/log" 2>&1; code=$?
  [[ $code -ne 0 ]] || { cat "$work/log"; fail "a bad image mid-epoch: exit 0"; }
  # Both ranks report the same line (the one that read it gathered to the other at the agreement).
  [[ $(grep -cE "ringtrain: \[rank [01]\] error: rank [01] could not load its batch of step [0-9]+: .*$f: Premature end of JPEG file, expected a complete JPEG" "$work/log") -eq 2 ]] \
    || { cat "$work/log"; fail "not both ranks named $f"; }
  [[ $(grep -E "error: rank [01] could not load" "$work/log" | sed 's/.*error: //' | sort -u | wc -l) -eq 1 ]] \
    || { cat "$work/log"; fail "the ranks' lines differ"; }
  "${mpi[@]}" -np 2 "$bin" train "${folder[@]}" --crop random-resized:32 --bad-images skip --run-dir "$work/skip" \
    > "$work/log" 2>&1 || { cat "$work/log"; fail "--bad-images skip failed"; }
  $py - "$work/skip/summary.json" "$f" <<'PY' || fail "summary.json does not list the skipped image"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["bad_images_skipped"] == 1 and sys.argv[2] in s["bad_images"][0], s.get("bad_images")
assert all(r["loader_threads"] >= 1 for r in s["ranks"]), s["ranks"]
PY
  "$bin" eval --checkpoint "$work/skip/model.rtck" > "$work/log" 2>&1 || { cat "$work/log"; fail "eval of a folder run failed"; }
  grep -q "16 test samples" "$work/log" || { cat "$work/log"; fail "eval did not use the folder's val/"; }
}

case_packed() {
  # ringtrain pack and --dataset packed end to end: a folder of photos packed as JPEG at a
  # max side, refused over itself, described and timed, trained on at np 2 with the block
  # shuffle and evaluated; a flipped byte, a truncated and a missing shard end every rank.
  "$MAKE_IMAGE_FOLDER" photos "$work/ph" 64 16 > /dev/null || fail "make_image_folder photos"
  "$bin" pack --dataset folder --data-dir "$work/ph" --out "$work/sh" --max-side 40 --quality 85 --shard-mb 0.05 \
    > "$work/log" 2>&1 || { cat "$work/log"; fail "pack failed"; }
  grep -qE "wrote .*: 64 training and 16 validation records in [0-9]+ shards" "$work/log" || { cat "$work/log"; fail "pack said"; }
  "$bin" pack --dataset folder --data-dir "$work/ph" --out "$work/sh" > "$work/log" 2>&1
  one_line_error "$work/log" $? 2 "--out .*: not empty; pass --overwrite"
  "$bin" datasets --dataset packed --data-dir "$work/sh" --crop random-resized:32 --time --loader-threads 2 > "$work/log" 2>&1 \
    || { cat "$work/log"; fail "datasets --time of packed shards failed"; }
  grep -qE "one epoch: 64 images decoded and augmented .* on 2 loader thread\(s\): [0-9]+ images/s" "$work/log" \
    || { cat "$work/log"; fail "datasets --time printed no rate"; }
  grep -qE "train: 64 records in 4 classes, [0-9]+ shard\(s\)" "$work/log" || { cat "$work/log"; fail "no packed report"; }
  packed=(--dataset packed --data-dir "$work/sh" --model lenet5 --batch-size 6 --epochs 1 --quiet --crop random-resized:32)
  "${mpi[@]}" -np 2 "$bin" train "${data[@]}" --epochs 1 --shuffle block > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" 2 "--shuffle block reads the blocks of packed shards" 2 $code
  "${mpi[@]}" -np 2 "$bin" train "${packed[@]}" --shuffle block --shuffle-block-mb 0.01 --loader-threads 2 \
    --run-dir "$work/run" > "$work/log" 2>&1 || { cat "$work/log"; fail "training on packed shards failed"; }
  $py - "$work/run/summary.json" <<'PY' || fail "summary.json: the samples an epoch leaves out"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["shuffle"] == "block" and s["train_samples"] == 64, s
assert s["train_samples_per_epoch"] == 60 and s["dropped_per_epoch"] == 4, s  # 5 steps of 2 x 6
PY
  "$bin" eval --checkpoint "$work/run/model.rtck" > "$work/log" 2>&1 || { cat "$work/log"; fail "eval of a packed run failed"; }
  grep -q "16 test samples" "$work/log" || { cat "$work/log"; fail "eval did not use the packed val split"; }
  # A flipped byte in the middle of the first shard: met mid-epoch by one rank's loader.
  s0=$work/sh/train-00000.shard
  printf '\x5a' | dd of="$s0" bs=1 seek=$(($(stat -c %s "$s0") / 2)) conv=notrunc status=none
  "${mpi[@]}" -np 2 "$bin" train "${packed[@]}" --loader-threads 2 --run-dir "$work/bad" > "$work/log" 2>&1; code=$?
  [[ $code -ne 0 ]] || { cat "$work/log"; fail "a flipped byte: exit 0"; }
  [[ $(grep -cE "ringtrain: \[rank [01]\] error: rank [01] could not load its batch of step [0-9]+: .*train-00000\.shard: record [0-9]+ of train at byte [0-9]+: (checksum mismatch|record header)" "$work/log") -eq 2 ]] \
    || { cat "$work/log"; fail "not both ranks named the shard and record"; }
  [[ $(grep -E "error: rank [01] could not load" "$work/log" | sed 's/.*error: //' | sort -u | wc -l) -eq 1 ]] \
    || { cat "$work/log"; fail "the ranks' lines differ"; }
  cp "$s0" "$work/s0" && head -c 1000 "$work/s0" > "$s0"
  "${mpi[@]}" -np 2 "$bin" train "${packed[@]}" > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" nonzero "train-00000\.shard: 1000 bytes, the index expects [0-9]+ \(truncated\)" 2 $code
  rm "$s0"
  "${mpi[@]}" -np 2 "$bin" train "${packed[@]}" > "$work/log" 2>&1; code=$?
  expect_fail "$work/log" nonzero "train-00000\.shard: cannot open shard \(No such file or directory\)" 2 $code
}
