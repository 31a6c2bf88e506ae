"""Image folders of the folder benchmarks (DIR/train/<class>, DIR/val/<class>), written offline by
the build's make_image_folder (test/images: the PNG and JPEG writers and the IDX reader the
folder tests already trust): Fashion-MNIST as lossless PNGs, or photo-sized synthetic JPEGs.
A folder is written under DIR.partial and renamed when complete, so an interrupted write is
never taken for a folder; one already there is used as it is."""
import os
import shutil

from .proc import BUILD, ROOT, BenchError, check, log

MAKER = os.environ.get("RINGTRAIN_MAKE_IMAGE_FOLDER", os.path.join(BUILD, "test", "images", "make_image_folder"))
DATA = os.environ.get("RINGTRAIN_BENCH_DATA", os.path.join(ROOT, "data", "bench"))
# Fashion-MNIST's training-set mean and std of x/255 (what ringtrain computes for a gray
# folder at start-up), given to both sides so that neither spends a decoding pass on them.
FASHION_MEAN, FASHION_STD = "0.2860", "0.3530"


def default_dir(kind, train, val, size=None):
    tag = f"{kind}-{train}-{val}" + (f"-{size}" if size else "")
    return os.path.join(DATA, tag)


def ensure(kind, path, train, val, size=None, dry_run=False):
    """path, written by make_image_folder KIND path TRAIN VAL [SIZE] unless it has a train/ already."""
    if os.path.isdir(os.path.join(path, "train")):
        return path
    if os.path.exists(path):  # never write into (or over) something that is not ours
        raise BenchError(f"{path}: no train/ in it (expected {path}/train/<class> and {path}/val/<class>)")
    cmd = [MAKER, kind, path + ".partial", str(train), str(val), *([size] if size else [])]
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
