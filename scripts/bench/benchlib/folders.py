"""Image folders of the folder benchmarks (DIR/train/<class>, DIR/val/<class>), written offline by
the build's make_image_folder (test/images: the PNG and JPEG writers and the IDX reader the
folder tests already trust): Fashion-MNIST as lossless PNGs, crops of real photographs that
Debian packages ship ("real"), or photo-sized synthetic JPEGs with grain ("photos").
A folder is written under DIR.partial and renamed when complete, so an interrupted write is
never taken for a folder; one already there is used as it is."""
import glob
import os
import shutil
import subprocess
import tempfile

from .proc import BUILD, ROOT, BenchError, check, log

MAKER = os.environ.get("RINGTRAIN_MAKE_IMAGE_FOLDER", os.path.join(BUILD, "test", "images", "make_image_folder"))
DATA = os.environ.get("RINGTRAIN_BENCH_DATA", os.path.join(ROOT, "data", "bench"))
# Fashion-MNIST's training-set mean and std of x/255 (what ringtrain computes for a gray
# folder at start-up), given to both sides so that neither spends a decoding pass on them.
FASHION_MEAN, FASHION_STD = "0.2860", "0.3530"


# The colour photographs of Debian 12 packages (camera pictures, not drawings or micrographs):
# one class each in a "real" folder. (package, path inside it)
DEBIAN_PHOTOS = [
    ("python3-skimage", "usr/lib/python3/dist-packages/skimage/data/" + f) for f in
    ("astronaut.png", "chelsea.png", "coffee.png", "motorcycle_left.png", "motorcycle_right.png", "rocket.jpg")
] + [("python3-sklearn", "usr/lib/python3/dist-packages/sklearn/datasets/images/" + f) for f in ("china.jpg", "flower.jpg")
     ] + [("python-matplotlib-data", "usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg")]


def debian_photos(dry_run=False):
    """The DEBIAN_PHOTOS files, copied once to DATA/debian-photos from the packages' .debs
    (apt-get download and dpkg-deb -x: nothing is installed)."""
    dest = os.path.join(DATA, "debian-photos")
    paths = [os.path.join(dest, os.path.basename(f)) for _, f in DEBIAN_PHOTOS]
    if all(os.path.exists(p) for p in paths) or dry_run:
        return paths
    packages = sorted({pkg for pkg, _ in DEBIAN_PHOTOS})
    log(f"fetching the photographs of {', '.join(packages)} into {dest} ...")
    with tempfile.TemporaryDirectory(prefix="bench-photos-") as tmp:
        r = subprocess.run(["apt-get", "download", *packages], cwd=tmp, capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            raise BenchError(f"apt-get download {' '.join(packages)} failed ({r.stderr.strip()[-200:]}); run "
                             "apt-get update first, or pass a folder of photographs (--data-dir / --folder)")
        for deb in glob.glob(os.path.join(tmp, "*.deb")):
            check(["dpkg-deb", "-x", deb, os.path.join(tmp, "x")])
        os.makedirs(dest, exist_ok=True)
        for (pkg, f), p in zip(DEBIAN_PHOTOS, paths):
            if not os.path.exists(os.path.join(tmp, "x", f)):
                raise BenchError(f"{pkg} has no {f}")
            shutil.copyfile(os.path.join(tmp, "x", f), p)
    return paths


def default_dir(kind, train, val, size=None):
    tag = f"{kind}-{train}-{val}" + (f"-{size}" if size else "")
    return os.path.join(DATA, tag)


def ensure(kind, path, train, val, size=None, dry_run=False):
    """path, written by make_image_folder KIND path TRAIN VAL [SIZE] [PHOTO...] unless it has a train/ already."""
    if os.path.isdir(os.path.join(path, "train")):
        return path
    if os.path.exists(path):  # never write into (or over) something that is not ours
        raise BenchError(f"{path}: no train/ in it (expected {path}/train/<class> and {path}/val/<class>)")
    sources = debian_photos(dry_run) if kind == "real" else []
    cmd = [MAKER, kind, path + ".partial", str(train), str(val), *([size] if size else []), *sources]
    if dry_run:
        print("# the folder, written once: " + " ".join(cmd) + f" && mv {path}.partial {path}")
        return path
    if not os.access(MAKER, os.X_OK):
        raise BenchError(f"{path} does not exist and {MAKER} is not built: cmake --build build --target "
                         "make_image_folder (or pass --data-dir DIR/ holding train/ and val/)")
    log(f"writing {path} ({kind}, {train} training and {val} validation images) ...")
    shutil.rmtree(path + ".partial", ignore_errors=True)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    check(cmd, timeout=3600)
    os.rename(path + ".partial", path)
    return path


def describe(path):
    """(images in train/, in val/, classes) of a folder, by listing it."""
    def count(split):
        return sum(len(files) for _, _, files in os.walk(os.path.join(path, split)))
    classes = [d for d in os.scandir(os.path.join(path, "train")) if d.is_dir()] if os.path.isdir(path) else []
    return count("train"), count("val"), len(classes)


def native_bf16():
    """Whether this CPU has native bf16 arithmetic (ringtrain --precision bf16 refuses to run without it)."""
    with open("/proc/cpuinfo") as f:
        flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    return "avx512_bf16" in flags or "amx_bf16" in flags
