"""Commands of a benchmark: each in its own process group, which is ended with it on a timeout,
Ctrl-C or SIGTERM, so no mpirun or rank outlives the benchmark that started it."""
import json
import os
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("RINGTRAIN_BUILD_DIR", os.path.join(ROOT, "build"))
# Harmless without root; lets mpirun (and an MPI singleton) start in containers that run as root.
MPI_ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


class BenchError(Exception):
    """A run that failed: the suite stops with this one-line message (exit 1)."""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def app(name):
    return os.path.join(BUILD, "apps", name)  # a binary of this tree's build (RINGTRAIN_BUILD_DIR, else build/)


def run(cmd, env=None, timeout=1800, stdout=subprocess.PIPE):
    """(exit status, stdout, stderr) of cmd, with MPI_ROOT_ENV and env over os.environ."""
    child = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True, start_new_session=True,
                             env={**os.environ, **MPI_ROOT_ENV, **(env or {})})
    try:
        out, err = child.communicate(timeout=timeout)
        return child.returncode, out or "", err
    except subprocess.TimeoutExpired:
        end_group(child)
        return 124, "", f"timed out after {timeout:.0f} s"
    except BaseException:
        end_group(child)
        raise


def check(cmd, env=None, timeout=1800):
    """stdout of cmd; BenchError naming the command and the end of its stderr if it fails."""
    rc, out, err = run(cmd, env, timeout)
    if rc != 0:
        raise BenchError(f"{' '.join(cmd)}: exit {rc}: {tail(err or out)}")
    return out


def end_group(child):
    """SIGTERM to the child's group (mpirun passes it to its ranks), SIGKILL 10 s later."""
    try:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    except ProcessLookupError:
        pass


def tail(text, n=6):
    return " | ".join(text.strip().splitlines()[-n:])


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        if line.strip().startswith("{"):
            return json.loads(line)
    raise BenchError(f"no JSON line in: {tail(text)}")


def load():
    """The load average, for the conditions line of every report (a shared machine moves runs)."""
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def cpu_name():
    with open("/proc/cpuinfo") as f:
        return next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "unknown CPU")
