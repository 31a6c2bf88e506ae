#!/usr/bin/python3
"""straggler.md from a `bench.py straggler` sweep: per repeat, steps/s per worker of sync ps, SSP K=0
and async, and the ratios async / sync ps and async / SSP K=0 within the repeat.

  straggler_report.py SWEEP_DIR STRAGGLER_MS "UPTIME BEFORE" "UPTIME AFTER"
"""
import os
import statistics
import sys

import sweepdata


def cell(v, digits=1):
    return "" if v is None else f"{v:.{digits}f}"


def build(rows, ms, before, after):
    ok = [r for r in rows if r.get("status") == "ok" and r.get("steps_per_s") is not None]
    by = {}
    for r in ok:
        by.setdefault(int(r["repeat"]), {})[r["mode"]] = r
    lines = [f"# Straggler benchmark: {ok[0]['model'] if ok else '?'}, last rank +{ms} ms per step",
             "", f"`uptime` before: `{before.strip()}`", "", f"`uptime` after: `{after.strip()}`", "",
             "Steps/s per worker (training time; an async run's workers listed after the mean). "
             "Ratios are within one repeat (the modes of a repeat ran back to back).", "",
             "| Repeat | sync ps | SSP K=0 | async (per worker) | async / sync ps | async / SSP K=0 |",
             "|---|---|---|---|---|---|"]
    ratios_ps, ratios_k0 = [], []
    for rep in sorted(by):
        m = by[rep]
        ps, k0, a = (m[k]["steps_per_s"] if k in m else None for k in ("sync ps", "SSP K=0", "async"))
        workers = (m["async"].get("worker_steps_per_s") or "").replace(";", " / ") if "async" in m else ""
        r_ps = a / ps if a and ps else None
        r_k0 = a / k0 if a and k0 else None
        ratios_ps += [r_ps] if r_ps else []
        ratios_k0 += [r_k0] if r_k0 else []
        lines.append(f"| {rep} | {cell(ps)} | {cell(k0)} | {cell(a)} ({workers}) | "
                     f"{cell(r_ps, 2)} | {cell(r_k0, 2)} |")
    if ratios_ps:
        summary = (f"Median ratio async / sync ps: **{statistics.median(ratios_ps):.2f}** "
                   f"(min {min(ratios_ps):.2f}, max {max(ratios_ps):.2f}, {len(ratios_ps)} repeats)")
        if ratios_k0:
            summary += f"; async / SSP K=0: {statistics.median(ratios_k0):.2f}"
        lines += ["", summary + "."]
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) != 5:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    out, ms, before, after = sys.argv[1:5]
    text = build(sweepdata.load_sweep(out), ms, before, after)
    with open(os.path.join(out, "straggler.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
