#!/usr/bin/env python3
"""bench.py loader's shard writer (scripts/bench/suites/loader.py write_raw_shards), written from
docs/images.md's format alone, read by the real reader: `ringtrain datasets --dataset packed`
must open both splits and count their records; one flipped payload byte must be named by
shard and record when the records are read (`datasets --time`). Usage: test_loader_shards.py RINGTRAIN"""
import os
import pathlib
import subprocess
import sys
import tempfile

root = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(root / "scripts" / "bench"))
from suites.loader import write_raw_shards  # noqa: E402

binary = sys.argv[1]
with tempfile.TemporaryDirectory() as d:
    write_raw_shards(d, 0.004, side=16)  # 0.004 GB of 16x16 RGB: 5102 records
    out = subprocess.run([binary, "datasets", "--dataset", "packed", "--data-dir", d], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "train: 5102 records in 10 classes, 1 shard(s)" in out.stdout, out.stdout
    assert "val: 64 records" in out.stdout, out.stdout
    shard = os.path.join(d, "train-00000.shard")
    with open(shard, "r+b") as f:  # record 7's payload starts at 8 + 7 * (16 + 768) + 16
        f.seek(8 + 7 * 784 + 16 + 100)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 1]))
    out = subprocess.run([binary, "datasets", "--dataset", "packed", "--data-dir", d, "--time", "--crop",
                          "random-resized:8", "--loader-threads", "1"], capture_output=True, text=True)
    assert out.returncode == 1, (out.returncode, out.stderr)
    assert "train-00000.shard: record 7 of train at byte 5496: checksum mismatch" in out.stderr, out.stderr
print("PASS")
