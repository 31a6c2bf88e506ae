"""Input pipeline: images/s of packed shards, the image folder and torchvision's ImageFolder + DataLoader.

One training epoch decoded, random-resized-cropped (--crop, default 224), flipped and normalised,
nothing else: `ringtrain datasets --time` on the folder and on its packed shards (`ringtrain pack
--max-side 256 --quality 90`, made once), and torchvision 0.14's ImageFolder + DataLoader (PIL)
with as many workers as loader threads, the three sides interleaved in every round (ABBA). The
ratios are taken within each round: folder / torchvision and packed / folder, per thread count.
--folder DIR is a folder of photographs (DIR/train/<class>/...). Without it, --images JPEGs at
500x375 to 600x450, quality 90, are written once to data/bench/: with --photos real (the
default), crops of the nine colour photographs Debian 12's python3-skimage, python3-sklearn and
python-matplotlib-data ship, one class each (make_image_folder real); with --photos synthetic,
ramps with grain (make_image_folder photos), whose files are ~4x larger (~220 against ~54 KB)
and costlier to entropy-decode. An epoch of a few thousand images keeps the start-up and the first epoch's
page faults on fresh batch buffers out of the thread ratio.

--rss-gb G measures the memory target instead: raw 256x256 RGB records written as shards of G GB
(by this script, from the documented format), one whole epoch read at np 2 with --model logreg
--crop random-resized:32, and each rank's peak RSS from summary.json (mapped pages would count).

  bench.py loader --folder ~/photos --threads 1,2 --rounds 3 --out bench/loader
  bench.py loader --rss-gb 4
"""
import os
import re
import struct
import tempfile
import time
import zlib

from benchlib import folders
from benchlib import rounds as R
from benchlib.proc import BenchError, app, check, load, log
from benchlib.ringtrain import rundata
from benchlib.table import Table, conditions, emit

TORCH_EPOCH = r"""
import sys, time, torch
from torchvision import datasets, transforms as T
root, workers, crop = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)
tf = T.Compose([T.RandomResizedCrop(crop), T.RandomHorizontalFlip(), T.ToTensor(),
                T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
ds = datasets.ImageFolder(root + "/train", tf)
t0, n = time.perf_counter(), 0
for x, _ in torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True, num_workers=workers, drop_last=True):
    n += x.shape[0]
print(n / (time.perf_counter() - t0))
"""


def add_arguments(p):
    p.add_argument("--folder", help="an image folder (DIR/train/<class>/...); default: written from photographs")
    p.add_argument("--photos", choices=("real", "synthetic"), default="real",
                   help="without --folder: crops of Debian's photographs, or ramps with grain")
    p.add_argument("--images", type=int, default=2560, help="training images written without --folder")
    p.add_argument("--threads", default="1,2", help="loader threads / DataLoader workers, comma-separated")
    p.add_argument("--crop", type=int, default=224)
    p.add_argument("--rss-gb", type=float, help="measure the memory target on G GB of packed records instead")
    p.add_argument("--work", help="scratch directory (default: a temporary one)")
    R.add_options(p)


def rate(text):
    m = re.search(r"([0-9.]+) images/s", text)
    if not m:
        raise BenchError(f"no images/s in: {text.strip()[-200:]}")
    return {"images_per_s": float(m.group(1))}


def measure(args, folder, shards, threads, side):
    if side == "torchvision":
        return {"images_per_s": float(check(["/usr/bin/python3", "-c", TORCH_EPOCH, folder, str(threads),
                                              str(args.crop)], timeout=args.timeout).split()[-1])}
    data = ["--dataset", "folder", "--data-dir", folder] if side == "folder" else ["--dataset", "packed", "--data-dir", shards]
    return rate(check([app("ringtrain"), "datasets", *data, "--crop", f"random-resized:{args.crop}", "--time",
                       "--loader-threads", str(threads)], timeout=args.timeout))


def throughput(args, work):
    folder = args.folder
    if not folder:
        kind = "real" if args.photos == "real" else "photos"
        folder = folders.ensure(kind, folders.default_dir(kind, args.images, 64, "500x375"), args.images, 64, "500x375")
    shards = os.path.join(work, "packed")
    log(check([app("ringtrain"), "pack", "--dataset", "folder", "--data-dir", folder, "--out", shards, "--max-side",
               "256", "--quality", "90", "--overwrite"]).strip().splitlines()[-1])
    threads = [int(t) for t in args.threads.split(",")]
    before = load()
    sides = ["packed", "folder", "torchvision"]
    res = R.interleave(args.rounds, threads, sides, lambda t, s, _r: measure(args, folder, shards, t, s))
    table = Table("threads", "packed img/s", "folder img/s", "torchvision img/s", "folder / torchvision",
                  "packed / folder")
    for t in threads:
        v = {s: res[(t, s)] for s in sides}
        table.add(t, *(R.cell(R.values(v[s], "images_per_s"), 0) for s in sides),
                  R.cell(R.paired(v["folder"], v["torchvision"], "images_per_s"), 2),
                  R.cell(R.paired(v["packed"], v["folder"], "images_per_s"), 2))
    # Each thread count against the first (the loaders' scaling), per side and round.
    scaling = Table("threads", *(f"{s} / {threads[0]} thread(s)" for s in sides))
    for t in threads[1:]:
        scaling.add(t, *(R.cell(R.paired(res[(t, s)], res[(threads[0], s)], "images_per_s"), 2) for s in sides))
    text = table.markdown() + ("\n\n" + scaling.markdown() if threads[1:] else "")
    emit(args, conditions(f"{folder}, crop {args.crop}, one epoch per run", before) + "\n\n" + text, R.flat(res))
    return 0


def write_raw_shards(out, gb, side=256):
    """Raw side x side RGB records (docs/images.md's format), 256 MB shards, until gb GB; 64 for val."""
    payload = bytes(range(256)) * (side * side * 3 // 256)
    per_shard = (256 << 20) // (16 + len(payload))
    for split, count in (("train", max(1, int(gb * 1e9) // (16 + len(payload)))), ("val", 64)):
        records, sizes = [], []
        for k in range(0, count, per_shard):
            with open(os.path.join(out, f"{split}-{len(sizes):05}.shard"), "wb") as f:
                f.write(b"RTSHARD1")
                for i in range(k, min(count, k + per_shard)):
                    head = struct.pack("<II", i % 10, len(payload))
                    crc = zlib.crc32(payload, zlib.crc32(head))
                    records.append(struct.pack("<IQIIIII", len(sizes), f.tell(), len(payload), i % 10, crc, side, side))
                    f.write(b"RTRC" + head + struct.pack("<I", crc) + payload)
                sizes.append(f.tell())
        body = b"RTPACKIX" + struct.pack("<IIIIIQ", 1, 0, 3, 10, len(sizes), count)
        body += b"".join(struct.pack("<I", 1) + str(c).encode() for c in range(10))
        body += struct.pack("<3f3f", 0.485, 0.456, 0.406, 0.229, 0.224, 0.225)
        body += b"".join(struct.pack("<Q", s) for s in sizes) + b"".join(records)
        with open(os.path.join(out, f"{split}.index"), "wb") as f:
            f.write(body + struct.pack("<I", zlib.crc32(body)))


def rss(args, work):
    shards = os.path.join(work, "rss")
    os.makedirs(shards, exist_ok=True)
    write_raw_shards(shards, args.rss_gb)
    before, run_dir = load(), os.path.join(work, "rss-run")
    t0 = time.time()
    check(["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none", app("ringtrain"), "train", "--dataset", "packed",
           "--data-dir", shards, "--model", "logreg", "--crop", "random-resized:32", "--epochs", "1", "--batch-size",
           "64", "--eval-every", "0", "--no-tensorboard", "--quiet", "--run-dir", run_dir], timeout=args.timeout)
    summary = rundata.Run(run_dir).summary_file or {}
    table = Table("rank", "peak RSS MB", "images/s")
    for r in summary.get("ranks", []):
        table.add(r["rank"], f"{r['peak_rss_mb']:.0f}", f"{r['images_per_s']:.0f}")
    emit(args, conditions(f"{args.rss_gb:g} GB of raw 256x256 records, np 2, {time.time() - t0:.0f} s", before) +
         "\n\n" + table.markdown())
    return 0


def run(args):
    if args.work:
        os.makedirs(args.work, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ringtrain-loader-", dir=args.work) as work:
        return rss(args, work) if args.rss_gb else throughput(args, work)
