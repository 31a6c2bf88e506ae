#!/usr/bin/python3
"""Download MNIST, CIFAR-10 or SVHN from their publishers, check every file's SHA-256, and lay
the files out as `ringtrain train --dataset NAME --data-dir DIR` reads them.

  scripts/get-data.sh cifar10 data/cifar10   # -> data/cifar10/cifar-10-batches-bin/*.bin
  scripts/get-data.sh svhn data/svhn         # -> data/svhn/{train,test}_32x32.mat
  scripts/get-data.sh mnist data/mnist       # -> data/mnist/*-ubyte.gz (read as they are)

Every file goes to a temporary name in DIR first and is moved into place only once all of a
data set's files have matched their checksums (an archive is unpacked into a temporary
directory first), so a failed or interrupted download leaves DIR as it was. Files already in
place are kept. Exit status: 0 done, 1 download or checksum failure, 2 usage error.
Fashion-MNIST needs no download: Debian's dataset-fashion-mnist (scripts/setup.sh) installs it
where ringtrain looks by default.
"""
import argparse
import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request

PROG = "get-data.sh"

# Per data set: where its publisher serves it (tried in order) and each file's SHA-256. The
# checksums are those of TensorFlow Datasets' url_checksums (mnist.txt, cifar10.txt,
# svhn_cropped.txt in github.com/tensorflow/datasets), read there, not re-derived from a
# download; for MNIST they are of the CVDF mirror's copies (tried second below), which have
# the byte sizes of LeCun's files.
DATASETS = {
    "mnist": {
        "urls": ["https://yann.lecun.com/exdb/mnist/",
                 "https://storage.googleapis.com/cvdf-datasets/mnist/"],
        "files": {
            "train-images-idx3-ubyte.gz":
                "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
            "train-labels-idx1-ubyte.gz":
                "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
            "t10k-images-idx3-ubyte.gz":
                "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
            "t10k-labels-idx1-ubyte.gz":
                "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
        },
    },
    "cifar10": {
        "urls": ["https://www.cs.toronto.edu/~kriz/"],
        "files": {
            "cifar-10-binary.tar.gz":
                "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd",
        },
        # The archive holds cifar-10-batches-bin/, which the reader finds inside --data-dir.
        "unpack": "cifar-10-batches-bin",
    },
    "svhn": {
        "urls": ["http://ufldl.stanford.edu/housenumbers/"],
        "files": {
            "train_32x32.mat": "435e94d69a87fde4fd4d7f3dd208dfc32cb6ae8af2240d066de1df7508d083b8",
            "test_32x32.mat": "cdce80dfb2a2c4c6160906d0bd7c68ec5a99d7ca4831afa54f09182025b6a75b",
        },
    },
}
TIMEOUT_S = 60  # per network read, not per file


class Failure(Exception):
    """A download, checksum or unpacking failure (exit 1)."""


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", choices=sorted(DATASETS))
    p.add_argument("dir", nargs="?", help="where to put it (default data/<dataset>); pass the "
                                          "same directory to ringtrain as --data-dir")
    p.add_argument("--base-url", default=os.environ.get("RINGTRAIN_DATA_URL"),
                   help="fetch the files from this URL instead of the publisher's "
                        "(a mirror; also $RINGTRAIN_DATA_URL)")
    p.add_argument("--checksums", metavar="FILE", default=os.environ.get("RINGTRAIN_DATA_SHA256"),
                   help="SHA-256 sums in sha256sum's format ('HASH  NAME' lines) instead of "
                        "the built-in ones (also $RINGTRAIN_DATA_SHA256); for tests and mirrors "
                        "of other files")
    args = p.parse_args(argv)
    args.dir = args.dir or os.path.join("data", args.dataset)
    return args


def read_checksums(path, names):
    sums = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2:
                    sums[parts[1].lstrip("*")] = parts[0].lower()
    except OSError as e:
        raise Failure(f"--checksums {path}: {e.strerror}")
    missing = [n for n in names if n not in sums]
    if missing:
        raise Failure(f"--checksums {path}: no SHA-256 for {', '.join(missing)}")
    return {n: sums[n] for n in names}


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download(urls, name, dest):
    """Fetches name from the first of urls that serves it into dest; Failure naming every URL
    tried otherwise."""
    errors = []
    for base in urls:
        url = base.rstrip("/") + "/" + name
        print(f"{PROG}: {url}", file=sys.stderr, flush=True)
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as r, open(dest, "wb") as out:
                shutil.copyfileobj(r, out, 1 << 20)
            return
        except urllib.error.HTTPError as e:
            errors.append(f"{url}: HTTP {e.code} {e.reason}")
        except (urllib.error.URLError, OSError) as e:
            errors.append(f"{url}: {getattr(e, 'reason', None) or e}")
    raise Failure("download failed: " + "; ".join(errors))


def fetch_all(spec, sums, urls, staging):
    """Downloads every file of a data set into staging and checks it; paths by name."""
    got = {}
    for name, want in sums.items():
        path = os.path.join(staging, name)
        download(urls, name, path)
        have = sha256_of(path)
        if have != want:
            raise Failure(f"{name}: SHA-256 {have}, expected {want}: a corrupt or different "
                          "file; nothing was installed")
        got[name] = path
    return got


def safe_members(tar, top):
    """The archive's members, all under top/ and none a link or device (an archive that
    would write elsewhere is refused)."""
    members = tar.getmembers()
    for m in members:
        parts = m.name.split("/")
        if parts[0] != top or ".." in parts or os.path.isabs(m.name) or not (m.isfile() or m.isdir()):
            raise Failure(f"archive member '{m.name}' is not a plain file under {top}/")
    return members


def install(spec, got, target, staging):
    """Moves the checked files (or an archive's directory) into target."""
    if "unpack" in spec:
        top = spec["unpack"]
        (archive,) = got.values()
        try:
            with tarfile.open(archive) as tar:
                tar.extractall(staging, members=safe_members(tar, top))
        except (tarfile.TarError, OSError) as e:
            raise Failure(f"{os.path.basename(archive)}: cannot unpack: {e}")
        os.replace(os.path.join(staging, top), os.path.join(target, top))
        return [os.path.join(target, top)]
    placed = []
    for name, path in got.items():
        os.replace(path, os.path.join(target, name))
        placed.append(os.path.join(target, name))
    return placed


def already_there(spec, target):
    if "unpack" in spec:
        return os.path.isdir(os.path.join(target, spec["unpack"]))
    return all(os.path.isfile(os.path.join(target, n)) for n in spec["files"])


def main(argv):
    args = parse_args(argv)
    spec = DATASETS[args.dataset]
    sums = read_checksums(args.checksums, spec["files"]) if args.checksums else spec["files"]
    urls = [args.base_url] if args.base_url else spec["urls"]
    target = os.path.abspath(args.dir)
    if already_there(spec, target):
        print(f"{PROG}: {args.dataset} is already in {target} (remove it to fetch again)")
    else:
        created = not os.path.exists(target)
        os.makedirs(target, exist_ok=True)
        # Staging inside the target: the final moves are renames on one file system.
        staging = tempfile.mkdtemp(prefix=".get-data-", dir=target)
        placed = []
        try:
            placed = install(spec, fetch_all(spec, sums, urls, staging), target, staging)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            if created and not placed:
                os.rmdir(target)  # a failure leaves no trace of a directory it made
        for p in placed:
            print(f"{PROG}: {p}")
    print(f"{PROG}: train with --dataset {args.dataset} --data-dir {target}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Failure as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
