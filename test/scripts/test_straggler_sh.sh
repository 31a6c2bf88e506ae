#!/usr/bin/env bash
# Tests `scripts/bench/bench.py straggler` through run.sh and the real mpirun with
# test/scripts/fake_ringtrain.py as the trainer: the three modes run interleaved per repeat
# with --straggler-ms, and straggler.md gives each repeat's ratio async / sync ps computed
# from results.csv (recomputed here).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
bench() { /usr/bin/python3 "$here/../../scripts/bench/bench.py" straggler "$@"; }
fake=$here/fake_ringtrain.py
export FAKE_RINGTRAIN_ARGS_LOG=$tmp/args.jsonl

bench --launcher "$here/../../scripts/mpirun/run.sh" --ppn 3 --bin "$fake" --repeats 2 --straggler-ms 7 \
  --out "$tmp/s" -- --max-steps 5 >"$tmp/log" 2>&1 || fail "bench.py straggler failed: $(tail -5 "$tmp/log")"
[[ -f $tmp/s/straggler.md ]] || fail "no straggler.md"
/usr/bin/python3 - "$tmp" <<'PY' || fail "launch order, flags or ratios"
import csv, json, re, sys
tmp = sys.argv[1]
runs = [json.loads(l)["argv"] for l in open(tmp + "/args.jsonl")]
dirs = [a[a.index("--run-dir") + 1].rsplit("/", 1)[1] for a in runs]
# Interleaved: repeat 1 of every mode, then repeat 2.
assert [d.rsplit("-", 1)[1] for d in dirs] == ["r1"] * 3 + ["r2"] * 3, dirs
assert all(a[a.index("--straggler-ms") + 1] == "7" for a in runs), runs
rows = {(r["mode"], r["repeat"]): r for r in csv.DictReader(open(tmp + "/s/results.csv"))}
md = open(tmp + "/s/straggler.md").read()
for rep in ("1", "2"):
    ratio = float(rows[("async", rep)]["steps_per_s"]) / float(rows[("sync ps", rep)]["steps_per_s"])
    line = next(l for l in md.splitlines() if l.startswith(f"| {rep} |"))
    assert f"| {ratio:.2f} |" in line, (line, ratio)
assert re.search(r"Median ratio async / sync ps: \*\*[0-9.]+\*\*", md), md
assert "`uptime` before" in md and "`uptime` after" in md
PY
bench --repeats 0 >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "--repeats 0 must exit 2"
finish test_straggler_sh "$tmp/log"
