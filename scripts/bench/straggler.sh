#!/usr/bin/env bash
# The straggler benchmark of issue 12: one worker slowed (--straggler-ms: the last rank sleeps
# after each gradient), sync ps against async (and SSP K=0) on the emulated cluster, 1 server +
# 2 workers. Runs a sweep.sh preset with the modes interleaved per repeat, then prints and
# writes DIR/straggler.md: each repeat's steps/s per worker and the ratio async / sync ps (and
# async / SSP K=0) of that repeat, with `uptime` before and after.
#
# usage: straggler.sh [--out DIR] [--repeats R] [--straggler-ms MS] [--model M] [--epochs E]
#                     [--launcher "CMD ARGS"] [--ppn P] [--bin PATH] [-- extra train flags]
#   The default launcher is the emulated cluster (scripts/mpirun/cluster.sh run --nodes 3
#   --link-rate 1gbit), which must be up: scripts/mpirun/cluster.sh up --nodes 3 --link-rate 1gbit;
#   one rank per node (--ppn 1; --launcher scripts/mpirun/run.sh --ppn 3: all on this host).
#   Timed runs on a shared machine: hold the bench lock, e.g.
#     flock /work/bench.lock scripts/bench/straggler.sh --out bench/straggler
# Exit status: 0 if every run succeeded, 1 otherwise, 2 for a usage error.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out=straggler-$(date +%Y%m%d-%H%M%S)
repeats=3
straggler_ms=20
model=lenet5
epochs=1
launcher="$root/scripts/mpirun/cluster.sh run --nodes 3 --link-rate 1gbit"
bin_opt=()
ppn=1
extra=()

die_usage() {
  echo "straggler.sh: error: $*" >&2
  exit 2
}

while [[ $# -gt 0 ]]; do
  case $1 in
    --out) [[ $# -ge 2 ]] || die_usage "--out needs a value"; out=$2; shift 2 ;;
    --repeats) [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || die_usage "--repeats wants a positive integer"
      repeats=$2; shift 2 ;;
    --straggler-ms) [[ $# -ge 2 && $2 =~ ^[0-9]+([.][0-9]+)?$ ]] || die_usage "--straggler-ms wants milliseconds"
      straggler_ms=$2; shift 2 ;;
    --model) [[ $# -ge 2 ]] || die_usage "--model needs a value"; model=$2; shift 2 ;;
    --epochs) [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || die_usage "--epochs wants a positive integer"
      epochs=$2; shift 2 ;;
    --launcher) [[ $# -ge 2 ]] || die_usage "--launcher needs a value"; launcher=$2; shift 2 ;;
    --ppn) [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || die_usage "--ppn wants a positive integer"
      ppn=$2; shift 2 ;;
    --bin) [[ $# -ge 2 ]] || die_usage "--bin needs a value"; bin_opt=(--bin "$2"); shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) die_usage "unknown option '$1'" ;;
  esac
done

load_before=$(uptime)
rc=0
"$root/scripts/mpirun/sweep.sh" --launcher "$launcher" --ranks 3 --ppn "$ppn" --threads 1 "${bin_opt[@]}" \
  --model "$model" --epochs "$epochs" --modes sync,ssp0,async --allreduce ps --repeats "$repeats" \
  --interleave --timeout 900 --out "$out" -- --straggler-ms "$straggler_ms" "${extra[@]}" || rc=$?
load_after=$(uptime)

/usr/bin/python3 - "$out" "$straggler_ms" "$load_before" "$load_after" <<'EOF'
import csv, os, statistics, sys

out, ms, before, after = sys.argv[1:5]
with open(os.path.join(out, "results.csv"), newline="") as f:
    rows = [r for r in csv.DictReader(f) if r["status"] == "ok" and r["steps_per_s"]]
by = {}
for r in rows:
    by.setdefault(int(r["repeat"]), {})[r["mode"]] = r
lines = [f"# Straggler benchmark: {rows[0]['model'] if rows else '?'}, last rank +{ms} ms per step",
         "", f"`uptime` before: `{before.strip()}`", "", f"`uptime` after: `{after.strip()}`", "",
         "Steps/s per worker (training time; an async run's workers listed after the mean). "
         "Ratios are within one repeat (the modes of a repeat ran back to back).", "",
         "| Repeat | sync ps | SSP K=0 | async (per worker) | async / sync ps | async / SSP K=0 |",
         "|---|---|---|---|---|---|"]
ratios_ps, ratios_k0 = [], []
for rep in sorted(by):
    m = by[rep]
    ps, k0, a = (float(m[k]["steps_per_s"]) if k in m else None
                 for k in ("sync ps", "SSP K=0", "async"))
    workers = m["async"]["worker_steps_per_s"].replace(";", " / ") if "async" in m else ""
    r_ps = a / ps if a and ps else None
    r_k0 = a / k0 if a and k0 else None
    if r_ps: ratios_ps.append(r_ps)
    if r_k0: ratios_k0.append(r_k0)
    cell = lambda v, d=1: "" if v is None else f"{v:.{d}f}"
    lines.append(f"| {rep} | {cell(ps)} | {cell(k0)} | {cell(a)} ({workers}) | "
                 f"{cell(r_ps, 2)} | {cell(r_k0, 2)} |")
if ratios_ps:
    summary = (f"Median ratio async / sync ps: **{statistics.median(ratios_ps):.2f}** "
               f"(min {min(ratios_ps):.2f}, max {max(ratios_ps):.2f}, {len(ratios_ps)} repeats)")
    if ratios_k0:
        summary += f"; async / SSP K=0: {statistics.median(ratios_k0):.2f}"
    lines += ["", summary + "."]
text = "\n".join(lines) + "\n"
with open(os.path.join(out, "straggler.md"), "w") as f:
    f.write(text)
print(text)
EOF
exit "$rc"
