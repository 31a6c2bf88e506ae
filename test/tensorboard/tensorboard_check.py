#!/usr/bin/python3
"""Checks a run directory's TensorBoard event files against the run's own logs.

usage: tensorboard_check.py RUN_DIR RANKS

Decodes every events.out.tfevents.* under RUN_DIR/tensorboard with the protobuf library
(protoc compiles tensorboard_event.proto, next to this script, into a temporary directory),
checks each record's framing and masked CRC-32C with python3-crc32c (not ringtrain's CRC),
that the first record is file_version "brain.Event:2", and that the scalars match the run:
epoch/ the rows of metrics.csv, step/ rank 0's step records, rank-<r>/ each rank's step
and resource records of rank-<r>.jsonl. Exits 1 with every mismatch listed.
"""
import csv
import glob
import atexit
import importlib
import json
import math
import os
import struct
import shutil
import subprocess
import sys
import tempfile

import crc32c

HERE = os.path.dirname(os.path.abspath(__file__))
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
    return cond


def event_module():
    out = tempfile.mkdtemp(prefix="tb-proto-")
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    subprocess.run(["protoc", f"--proto_path={HERE}", f"--python_out={out}",
                    os.path.join(HERE, "tensorboard_event.proto")], check=True)
    sys.path.insert(0, out)
    return importlib.import_module("tensorboard_event_pb2")


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def read_records(path):
    data = open(path, "rb").read()
    records, pos = [], 0
    while pos < len(data):
        if not check(len(data) - pos >= 12, f"{path}: truncated header at byte {pos}"):
            break
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        check(length_crc == masked(crc32c.crc32c(header)), f"{path}: bad length CRC at byte {pos}")
        body = data[pos + 12:pos + 12 + length]
        if not check(len(data) >= pos + 16 + length, f"{path}: truncated record at byte {pos}"):
            break
        (data_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        check(data_crc == masked(crc32c.crc32c(body)), f"{path}: bad data CRC at byte {pos}")
        records.append(body)
        pos += 16 + length
    return records


texts = {}  # directory -> [(file index, step, tag, text)] of its text summaries


def read_run(pb, directory):
    """[(step, {tag: value})] of every scalar summary event of the run's files, in order;
    text summaries (TensorBoard's text plugin) go to texts[directory]."""
    files = sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*")))
    check(len(files) >= 1, f"{directory}: no event file")
    out = []
    for index, path in enumerate(files):
        events = [pb.Event.FromString(r) for r in read_records(path)]
        if not check(len(events) >= 1, f"{path}: empty"):
            continue
        check(events[0].WhichOneof("what") == "file_version" and events[0].file_version == "brain.Event:2",
              f"{path}: first record is not file_version brain.Event:2: {events[0]}")
        for e in events[1:]:
            check(e.WhichOneof("what") == "summary", f"{path}: event without a summary: {e}")
            check(e.wall_time > 1.5e9, f"{path}: wall_time {e.wall_time} is not a Unix time")
            values = {}
            for v in e.summary.value:
                if v.WhichOneof("value") == "tensor":
                    t = v.tensor
                    check(v.metadata.plugin_data.plugin_name == "text" and t.dtype == 7
                          and len(t.string_val) == 1, f"{path}: {v.tag} is not a text summary: {v}")
                    texts.setdefault(directory, []).append((index, e.step, v.tag,
                                                            t.string_val[0].decode() if t.string_val else ""))
                    continue
                check(v.WhichOneof("value") == "simple_value", f"{path}: {v.tag} is not a simple_value")
                values[v.tag] = v.simple_value
            if values:
                out.append((e.step, values))
    return out


def close(a, b, rel=1e-5):
    return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-6)


def jsonl(path, kind):
    return [r for r in (json.loads(line) for line in open(path)) if r["type"] == kind]


def main():
    run_dir, ranks = sys.argv[1], int(sys.argv[2])
    pb = event_module()
    tb = os.path.join(run_dir, "tensorboard")
    want_dirs = {"epoch", "step"} | {f"rank-{r}" for r in range(ranks)}
    check(set(os.listdir(tb)) == want_dirs, f"tensorboard/ holds {sorted(os.listdir(tb))}, not {sorted(want_dirs)}")

    # epoch/: one event per metrics.csv row, at its step, with its values.
    rows = list(csv.DictReader(open(os.path.join(run_dir, "metrics.csv"))))
    epochs = read_run(pb, os.path.join(tb, "epoch"))
    check([s for s, _ in epochs] == [int(r["step"]) for r in rows],
          f"epoch steps {[s for s, _ in epochs]} != metrics.csv steps {[r['step'] for r in rows]}")
    columns = {"train/loss": "train_loss", "train/accuracy": "train_accuracy", "test/loss": "test_loss",
               "test/accuracy": "test_accuracy", "lr": "lr", "images_per_s": "images_per_s"}
    for (step, values), row in zip(epochs, rows):
        want = {tag: float(row[col]) for tag, col in columns.items() if row[col] != ""}
        check(set(values) == set(want), f"epoch step {step}: tags {sorted(values)} != {sorted(want)}")
        for tag, v in want.items():
            check(tag in values and close(values[tag], v), f"epoch step {step}: {tag} {values.get(tag)} != {v}")

    # epoch/ also holds the run's settings as text, once, at step 0 of its first event file,
    # with config.json's values (precision among them).
    config = json.load(open(os.path.join(run_dir, "config.json")))
    settings = texts.get(os.path.join(tb, "epoch"), [])
    check([(i, s, tag) for i, s, tag, _ in settings] == [(0, 0, "run/config")],
          f"epoch/ text summaries {[(i, s, tag) for i, s, tag, _ in settings]} != [(0, 0, 'run/config')]")
    for key in ("model", "precision", "world_size", "allreduce", "compress"):
        want = config[key] if isinstance(config[key], str) else json.dumps(config[key])
        check(any(f"| {key} | {want} |" in text for _, _, _, text in settings),
              f"run/config text has no row '| {key} | {want} |'")

    # step/: rank 0's log records.
    steps = jsonl(os.path.join(run_dir, "rank-0.jsonl"), "step")
    logged = read_run(pb, os.path.join(tb, "step"))
    check([s for s, _ in logged] == [r["step"] for r in steps],
          f"step/ steps {[s for s, _ in logged]} != rank-0.jsonl {[r['step'] for r in steps]}")
    for (step, values), rec in zip(logged, steps):
        check(set(values) == {"train/loss", "train/accuracy", "lr", "images_per_s"}, f"step {step}: {sorted(values)}")
        for tag, key in (("train/loss", "loss"), ("train/accuracy", "accuracy"), ("lr", "lr")):
            check(close(values.get(tag, math.nan), rec[key]), f"step {step}: {tag} {values.get(tag)} != {rec[key]}")
        check(values.get("images_per_s", 0) > 0, f"step {step}: images_per_s {values.get('images_per_s')}")

    # rank-<r>/: phase shares per step record, resource samples at their step.
    # In sequence within a step; allreduce overlaps backward by allreduce - exposed_comm.
    phases = ("data", "forward", "backward", "exposed_comm", "optimizer", "checkpoint")
    for r in range(ranks):
        path = os.path.join(run_dir, f"rank-{r}.jsonl")
        steps, resources = jsonl(path, "step"), jsonl(path, "resource")
        events = read_run(pb, os.path.join(tb, f"rank-{r}"))
        timed = [(s, v) for s, v in events if "time/forward" in v]
        sampled = [(s, v) for s, v in events if "resource/cpu_percent" in v]
        check(len(timed) + len(sampled) == len(events), f"rank {r}: events of neither kind")
        check([s for s, _ in timed] == [x["step"] for x in steps],
              f"rank {r}: time/ steps {[s for s, _ in timed]} != {[x['step'] for x in steps]}")
        for (step, v), rec in zip(timed, steps):
            total = sum(rec[p + "_s"] for p in phases)
            for p in phases + ("allreduce", "wait"):
                check(close(v.get("time/" + p, math.nan), rec[p + "_s"] / total, rel=1e-4),
                      f"rank {r} step {step}: time/{p} {v.get('time/' + p)} != {rec[p + '_s'] / total}")
            check(abs(sum(v["time/" + p] for p in phases) - 1.0) < 1e-4, f"rank {r} step {step}: shares")
            check(close(v.get("time/step_seconds", math.nan), total / rec["steps"], rel=1e-4),
                  f"rank {r} step {step}: time/step_seconds")
        check([s for s, _ in sampled] == [x["step"] for x in resources],
              f"rank {r}: resource steps {[s for s, _ in sampled]} != {[x['step'] for x in resources]}")
        for (step, v), rec in zip(sampled, resources):
            for key in ("cpu_percent", "rss_mb", "net_send_mbps", "net_recv_mbps", "wait_share"):
                check(close(v.get("resource/" + key, math.nan), rec[key], rel=1e-4),
                      f"rank {r} step {step}: resource/{key} {v.get('resource/' + key)} != {rec[key]}")

    if failures:
        print("\n".join(f"FAIL: {f}" for f in failures[:40]), file=sys.stderr)
        return 1
    print(f"tensorboard_check: {run_dir}: {len(epochs)} epoch, {len(logged)} step events, {ranks} rank run(s) ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
