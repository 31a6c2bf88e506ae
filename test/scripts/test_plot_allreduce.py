#!/usr/bin/python3
"""Tests scripts/plot/plot_allreduce.py: a fabricated allreduce_bench CSV with three
algorithms gives a valid PNG with one line per algorithm (checked through read_rows), a CSV
without the busbw column and a missing file are one-line errors with exit 1; --table reads
a benchmark record's sections and plots those with three sizes or more.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
PLOT = os.path.join(REPO, "scripts", "plot", "plot_allreduce.py")
sys.path.insert(0, os.path.dirname(PLOT))
import plot_allreduce  # noqa: E402

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)


def main():
    tmp = tempfile.mkdtemp(prefix="plot-allreduce-")
    good = os.path.join(tmp, "bench.csv")
    with open(good, "w") as f:
        f.write("bytes,count,algo,ranks,time_min_us,time_avg_us,time_max_us,algbw_gbs,busbw_gbs,vs_mpi,errors\n")
        for algo, bw in (("ring", 1.0), ("rab", 2.0), ("ring/bf16", 3.0)):
            for k, size in enumerate((65536, 1048576, 16777216)):
                f.write(f"{size},{size // 4},{algo},4,1,1,1,{bw},{bw * (k + 1)},0,0\n")
    lines, ranks = plot_allreduce.read_rows(good)
    check(sorted(lines) == ["rab", "ring", "ring/bf16"], f"lines: {sorted(lines)}")
    check(lines["rab"] == [(65536, 2.0), (1048576, 4.0), (16777216, 6.0)], f"rab: {lines['rab']}")
    check(ranks == "4", f"ranks {ranks}")
    out = os.path.join(tmp, "bench.png")
    p = subprocess.run([sys.executable, PLOT, good], capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout.strip() == out, f"exit {p.returncode}: {p.stdout} {p.stderr}")
    with open(out, "rb") as f:
        check(f.read(8) == b"\x89PNG\r\n\x1a\n", "not a PNG")
    check(os.path.getsize(out) > 10_000, "PNG suspiciously small")

    bad = os.path.join(tmp, "bad.csv")
    with open(bad, "w") as f:
        f.write("bytes,algo,ranks\n4,ring,2\n")
    for path, words in ((bad, "busbw_gbs"), (os.path.join(tmp, "none.csv"), "No such file")):
        p = subprocess.run([sys.executable, PLOT, path], capture_output=True, text=True)
        check(p.returncode == 1, f"{path}: exit {p.returncode}")
        check(words in p.stderr and p.stderr.count("\n") == 1, f"{path}: stderr {p.stderr!r}")
    # A benchmark record: two sections, the second with only two sizes (no plot for it).
    record = os.path.join(tmp, "record.txt")
    with open(record, "w") as f:
        f.write("# comment\n## two nodes (12:00 UTC)\n")
        f.write("#     size(B)       count      algo     min(us)     avg(us)     max(us) algbw(GB/s) busbw(GB/s)  vs_mpi  errors\n")
        for size in (1024, 4096, 16384):
            for algo, bw in (("ring", 0.5), ("rd", 0.25)):
                f.write(f"{size:>13} {size // 4:>11} {algo:>9} 1.0 2.0 3.0 0.100 {bw * size / 1024:.3f} 1.00 0\n")
        f.write("## one size only\n     1024    256  ring  1.0 2.0 3.0 0.1 0.2 0\n     2048    512  ring  1.0 2.0 3.0 0.1 0.2 0\n")
    sections = plot_allreduce.read_table_sections(record)
    check([t for t, _ in sections] == ["two nodes (12:00 UTC)", "one size only"], f"sections {sections}")
    check(sections[0][1]["rd"] == [(1024, 0.25), (4096, 1.0), (16384, 4.0)], f"rd {sections[0][1]}")
    p = subprocess.run([sys.executable, PLOT, "--table", record, "--out-dir", os.path.join(tmp, "plots")],
                       capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout.split() == [os.path.join(tmp, "plots", "record-1.png")],
          f"--table: exit {p.returncode}: {p.stdout!r} {p.stderr}")
    p = subprocess.run([sys.executable, PLOT, "--table", bad], capture_output=True, text=True)
    check(p.returncode == 1 and "no allreduce_bench table rows" in p.stderr, f"--table bad: {p.stderr!r}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
