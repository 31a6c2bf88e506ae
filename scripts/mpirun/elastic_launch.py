"""One launch of an elastic run (scripts/mpirun/elastic.py): what it wrote to rank 0's log,
which ranks its stall watchdogs named, and the time formats of membership.jsonl. Split from
elastic.py, which decides and runs the launches.
"""
import datetime
import json
import re
import sys
import time

def complete_lines_end(path):
    """The offset just past the last newline of `path` (0 if absent): where a resumed run
    appends after cutting a torn last line away."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return 0
    return data.rfind(b"\n") + 1


def launch_records(path, offset):
    """What one launch wrote to a rank log from `offset`: its first-step event (step, unix_s,
    t) and its last step record (step, t). Lines that do not parse (a torn one) are skipped."""
    first, last = None, None
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            lines = f.read().split(b"\n")
    except OSError:
        return first, last
    for line in lines:
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if not isinstance(r, dict):
            continue
        if r.get("type") == "event" and "unix_s" in r and first is None:
            first = r
        elif r.get("type") == "step":
            last = r
    return first, last


# The stall watchdog's error (src/collectives/StallWatchdog.cpp): "... stall timeout: ...;
# stalled rank(s): rank 1 on node-b [silent for 4.2 s; last seen: ...], rank 3 on ... [...];
# ending the job ...".
STALL_ERROR = re.compile(r"\] error: stall timeout: .*?; stalled rank\(s\): (.*); ending the job")
STALLED_RANK = re.compile(r"rank (\d+) on (\S+) \[([^\]]*)\]")


def stalled_ranks(line):
    """[{rank, host, detail}] named by a stall timeout error line, else []."""
    m = STALL_ERROR.search(line)
    if not m:
        return []
    return [{"rank": int(r), "host": h, "detail": d} for r, h, d in STALLED_RANK.findall(m.group(1))]


def forward_stderr(pipe, launch):
    """Passes the launch's stderr through line by line, keeping the ranks a stall timeout named."""
    for raw in iter(pipe.readline, b""):
        sys.stderr.buffer.write(raw)
        sys.stderr.buffer.flush()
        for r in stalled_ranks(raw.decode(errors="replace")):
            if all(x["rank"] != r["rank"] for x in launch.stalled):
                launch.stalled.append(r)
    pipe.close()


def utc(t):
    if t is None:
        return None
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(timespec="milliseconds")


def rounded(x, digits=3):
    return None if x is None else round(x, digits)


class Launch:
    """One run of run.sh: its hosts, rank count and where its records start in rank-0.jsonl."""

    def __init__(self, number, hosts, np_, rank0_log):
        self.number, self.hosts, self.np = number, hosts, np_
        self.offset = complete_lines_end(rank0_log)
        self.rank0_log = rank0_log
        self.started = time.time()
        self.status = None
        self.ended = None
        self.stalled = []  # the ranks its stall watchdogs named, if a stall ended it

    def records(self):
        return launch_records(self.rank0_log, self.offset)

    def first_step(self):
        first, _ = self.records()
        return first

    def last_step(self):
        """(step, unix time) of the last step this launch logged, or (None, None). The time
        comes from the `t` of the step record against the first-step event's (t, unix_s)."""
        first, last = self.records()
        if first is None:
            return None, None
        if last is None or last.get("step", 0) < first.get("step", 0):
            return first.get("step"), first.get("unix_s")
        return last.get("step"), first["unix_s"] + (last["t"] - first["t"])
