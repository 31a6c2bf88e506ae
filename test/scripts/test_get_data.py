#!/usr/bin/python3
"""Tests scripts/get-data.sh against an HTTP server on 127.0.0.1 serving generated files (small
but well-formed MNIST IDX .gz files, a CIFAR-10 binary archive, two SVHN .mat stand-ins), with
the base URL and the checksums overridden: each data set lands where --data-dir expects it
(and, given the binary, `ringtrain train` reads it); a wrong checksum, a missing file on the
server and an archive member outside its directory fail with a non-zero exit and leave
nothing behind; a second run finds the files in place; the trainer's missing-data error
names the command.
usage: test_get_data.py [PATH/TO/ringtrain]
"""
import functools
import gzip
import hashlib
import http.server
import io
import os
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
GET = os.path.join(REPO, "scripts", "get-data.sh")
failures = []
served = []  # request paths, in order


def check(cond, msg):
    if not cond:
        failures.append(msg)


def idx_images(n):
    return struct.pack(">IIII", 0x803, n, 28, 28) + bytes((i * 7) % 256 for i in range(n * 28 * 28))


def idx_labels(n):
    return struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n))


def cifar_archive(top="cifar-10-batches-bin"):
    records = lambda n: b"".join(bytes([i % 10]) + bytes((i + j) % 256 for j in range(3072)) for i in range(n))
    files = {f"data_batch_{b}.bin": records(8) for b in range(1, 6)}
    files["test_batch.bin"] = records(8)
    files["batches.meta.txt"] = "".join(f"class{c}\n" for c in range(10)).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def make_site(root):
    """The generated files under root/<dataset>/, and a sha256sum file per data set."""
    content = {
        "mnist": {"train-images-idx3-ubyte.gz": gzip.compress(idx_images(40)),
                  "train-labels-idx1-ubyte.gz": gzip.compress(idx_labels(40)),
                  "t10k-images-idx3-ubyte.gz": gzip.compress(idx_images(20)),
                  "t10k-labels-idx1-ubyte.gz": gzip.compress(idx_labels(20))},
        "cifar10": {"cifar-10-binary.tar.gz": cifar_archive()},
        "svhn": {"train_32x32.mat": b"MATLAB 5.0 stand-in train", "test_32x32.mat": b"stand-in test"},
        "evil": {"cifar-10-binary.tar.gz": cifar_archive(top="../escaped")},
    }
    sums = {}
    for ds, files in content.items():
        os.makedirs(os.path.join(root, ds))
        lines = []
        for name, data in files.items():
            with open(os.path.join(root, ds, name), "wb") as f:
                f.write(data)
            lines.append(f"{hashlib.sha256(data).hexdigest()}  {name}\n")
        sums[ds] = os.path.join(root, f"{ds}.sha256")
        with open(sums[ds], "w") as f:
            f.writelines(lines)
    return sums


class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        served.append(self.path)


def get(dataset, target, base, sums):
    return subprocess.run([GET, dataset, target, "--base-url", base, "--checksums", sums],
                          capture_output=True, text=True, timeout=120)


def leftovers(d):
    return [n for n in os.listdir(d) if n.startswith(".")] if os.path.isdir(d) else []


def check_good(tmp, url, sums):
    for ds, expect in (("mnist", ["train-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]),
                       ("cifar10", ["cifar-10-batches-bin/data_batch_5.bin",
                                    "cifar-10-batches-bin/batches.meta.txt"]),
                       ("svhn", ["train_32x32.mat", "test_32x32.mat"])):
        d = os.path.join(tmp, "data", ds)
        p = get(ds, d, f"{url}/{ds}", sums[ds])
        check(p.returncode == 0, f"{ds}: exit {p.returncode}: {p.stderr}")
        for f in expect:
            check(os.path.isfile(os.path.join(d, f)), f"{ds}: no {f}")
        check(not leftovers(d), f"{ds}: temporary files left: {leftovers(d)}")
        check(f"--data-dir {d}" in p.stdout, f"{ds}: does not say what to pass: {p.stdout}")
    check(not os.path.exists(os.path.join(tmp, "data", "cifar10", "cifar-10-binary.tar.gz")),
          "the CIFAR-10 archive should not stay after unpacking")
    # A second run finds the files in place and fetches nothing.
    before = len(served)
    p = get("mnist", os.path.join(tmp, "data", "mnist"), f"{url}/mnist", sums["mnist"])
    check(p.returncode == 0 and "already" in p.stdout and len(served) == before,
          f"second run: exit {p.returncode}, {len(served) - before} requests: {p.stdout}")


def check_bad(tmp, url, sums, root):
    # Wrong checksum of the third of four files: nothing installed, not even the first two.
    with open(sums["mnist"]) as f:
        lines = f.readlines()
    lines[2] = "0" * 64 + lines[2][64:]
    wrong = os.path.join(tmp, "wrong.sha256")
    with open(wrong, "w") as f:
        f.writelines(lines)
    d = os.path.join(tmp, "bad", "mnist")
    p = get("mnist", d, f"{url}/mnist", wrong)
    check(p.returncode == 1 and "SHA-256" in p.stderr and "t10k-images-idx3-ubyte.gz" in p.stderr,
          f"wrong checksum: exit {p.returncode}: {p.stderr}")
    check(not os.path.exists(d), f"wrong checksum: {d} should not exist: "
                                 f"{os.listdir(d) if os.path.isdir(d) else ''}")
    # Wrong archive checksum into an existing directory: left as it was.
    d = os.path.join(tmp, "bad", "cifar10")
    os.makedirs(d)
    with open(os.path.join(d, "keep.txt"), "w") as f:
        f.write("mine")
    with open(wrong, "w") as f:
        f.write("f" * 64 + "  cifar-10-binary.tar.gz\n")
    p = get("cifar10", d, f"{url}/cifar10", wrong)
    check(p.returncode == 1 and sorted(os.listdir(d)) == ["keep.txt"],
          f"wrong archive checksum: exit {p.returncode}, left {os.listdir(d)}: {p.stderr}")
    # An archive whose members would land outside their directory is refused.
    p = get("cifar10", d, f"{url}/evil", sums["evil"])
    check(p.returncode == 1 and "not a plain file under" in p.stderr and sorted(os.listdir(d)) == ["keep.txt"]
          and not os.path.exists(os.path.join(tmp, "bad", "escaped")),
          f"escaping archive: exit {p.returncode}, left {os.listdir(d)}: {p.stderr}")
    # A file the server does not have, and a checksum file without the name.
    p = get("svhn", os.path.join(tmp, "bad", "svhn"), f"{url}/nothing-here", sums["svhn"])
    check(p.returncode == 1 and "download failed" in p.stderr and "404" in p.stderr,
          f"404: exit {p.returncode}: {p.stderr}")
    p = get("svhn", os.path.join(tmp, "bad", "svhn"), f"{url}/svhn", sums["mnist"])
    check(p.returncode == 1 and "no SHA-256 for" in p.stderr, f"incomplete sums: {p.stderr}")
    p = subprocess.run([GET, "imagenet"], capture_output=True, text=True)
    check(p.returncode == 2, f"unknown data set: exit {p.returncode}")


def check_trainer(binary, tmp):
    """The downloaded layout is what the trainer reads; a missing one names the command."""
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMP_NUM_THREADS": "1"}
    for ds, model in (("mnist", "logreg"), ("cifar10", "logreg")):
        p = subprocess.run([binary, "train", "--dataset", ds, "--data-dir", os.path.join(tmp, "data", ds),
                            "--model", model, "--epochs", "1", "--batch-size", "4", "--max-steps", "2",
                            "--quiet", "--run-dir", os.path.join(tmp, f"run-{ds}")],
                           capture_output=True, text=True, env=env, timeout=120)
        check(p.returncode == 0, f"ringtrain on the fetched {ds}: exit {p.returncode}: {p.stderr[-400:]}")
    p = subprocess.run([binary, "train", "--dataset", "cifar10", "--data-dir", os.path.join(tmp, "nowhere"),
                        "--model", "logreg", "--quiet", "--run-dir", os.path.join(tmp, "run-missing")],
                       capture_output=True, text=True, env=env, timeout=120)
    check(p.returncode != 0 and "scripts/get-data.sh cifar10 DIR" in p.stderr,
          f"missing data: exit {p.returncode}: {p.stderr}")


def main():
    tmp = tempfile.mkdtemp(prefix="get-data-test-")
    root = os.path.join(tmp, "site")
    sums = make_site(root)
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=root))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        check_good(tmp, url, sums)
        check_bad(tmp, url, sums, root)
        binary = sys.argv[1] if len(sys.argv) > 1 else ""
        if binary and os.access(binary, os.X_OK):
            check_trainer(binary, tmp)
        else:
            print(f"test_get_data: no ringtrain binary given: the trainer checks are skipped")
    finally:
        server.shutdown()
    if failures:
        for msg in failures:
            print("FAIL:", msg)
        print(f"test_get_data: {len(failures)} failure(s); files in {tmp}")
        return 1
    subprocess.run(["rm", "-rf", tmp])
    print("test_get_data: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
