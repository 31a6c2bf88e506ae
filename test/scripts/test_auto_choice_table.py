#!/usr/bin/env python3
"""bench.py auto-choice (scripts/bench/suites/auto_choice.py): the committed table of
docs/benchmarks/allreduce-auto-choice.md is what the script makes from the committed record
(a change of the model's mirror or defaults that moves a cell fails here until the doc is
redone), and its formulas give the C++ test's pinned values (AutoChoiceTest.cpp)."""
import pathlib
import subprocess
import sys

root = pathlib.Path(__file__).resolve().parents[2]
bench = root / "scripts/bench/bench.py"
record = root / "docs/benchmarks/allreduce-cluster-quiet.txt"
doc = root / "docs/benchmarks/allreduce-auto-choice.md"

out = subprocess.run(["/usr/bin/python3", str(bench), "auto-choice", str(record)], capture_output=True, text=True, check=True)
made = [l for l in out.stdout.splitlines() if l.startswith("| ")]
committed = doc.read_text().split("## Every cell", 1)[1]
kept = [l for l in committed.splitlines() if l.startswith("| ")]
assert made == kept, "allreduce-auto-choice.md's table differs from the script's output: rerun the script"
assert "116 cells" in out.stderr and "over 1.05: 4" in out.stderr, out.stderr

sys.path.insert(0, str(bench.parent))
from suites import auto_choice as t  # noqa: E402

m = dict(t.DEFAULTS)
# The pins of AutoChoiceTest.cpp's last case (fp32).
for nodes, size, want in [(2, 1 << 10, "rd"), (2, 4 << 10, "ring"), (2, 64 << 20, "ring"), (3, 1 << 10, "rd"),
                          (3, 4 << 10, "ring"), (3, 256 << 20, "ring"), (4, 16 << 10, "rd"), (4, 128 << 10, "rd"),
                          (4, 256 << 10, "ring"), (4, 256 << 20, "ring")]:
    got = t.choose(size, nodes, m)[0]
    assert got == want, (nodes, size, got, want)
# A formula the C++ test checks term by term: rd, 4 ranks, 1 MiB, alpha 10 us, beta 1 ns/B,
# rendezvous 3 ns/B, no gamma: four rendezvous messages (3 alpha each) + 2 (n/2 + n/4) x 3 ns.
m2 = dict(m, alpha_s=10e-6, beta_s_per_byte=1e-9, rendezvous_beta_s_per_byte=3e-9, gamma_s_per_byte=0.0)
n = 1 << 20
assert abs(t.predict("rd", n, 4, m2) - (12 * 10e-6 + 2 * (n / 2 + n / 4) * 3e-9)) < 1e-12
print("ok")
