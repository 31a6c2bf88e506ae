#!/usr/bin/python3
"""Compares ringtrain's CRC-32C (table and SSE4.2 paths, via crc32c_tool) with Debian's
python3-crc32c on random data at many lengths and alignments.

usage: crc32c_vs_python.py CRC32C_TOOL
"""
import os
import random
import subprocess
import sys
import tempfile

import crc32c


def main():
    rng = random.Random(20261123)
    data = bytes(rng.getrandbits(8) for _ in range(70000))
    with tempfile.NamedTemporaryFile(prefix="crc32c-", delete=False) as f:
        f.write(data)
    try:
        out = subprocess.run([sys.argv[1], f.name], check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(f.name)
    lines = out.split("\n")[:-1]
    bad, hardware = [], 0
    for line in lines:
        offset, length, table, hw = line.split()
        want = f"{crc32c.crc32c(data[int(offset):int(offset) + int(length)]):08x}"
        if table != want:
            bad.append(f"table: offset {offset} length {length}: {table} != {want}")
        if hw != "-":
            hardware += 1
            if hw != want:
                bad.append(f"hardware: offset {offset} length {length}: {hw} != {want}")
    if len(lines) < 8 * 70 or bad:
        print("\n".join(bad[:20]) or f"only {len(lines)} slices", file=sys.stderr)
        return 1
    print(f"crc32c_vs_python: {len(lines)} slices agree with python3-crc32c "
          f"(table path; hardware path on {hardware})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
