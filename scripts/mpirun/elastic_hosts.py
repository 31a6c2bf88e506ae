"""The hosts and options of an elastic launch (scripts/mpirun/elastic.py): the user's
hostfile, train's options (command line or --config), the rank count that fits, and which
hosts still answer. Split from elastic.py, which decides and runs the launches.
"""
import os
import shlex
import signal
import socket
import subprocess
import sys
import time

PROG = "run.sh: elastic"
EXIT_USAGE = 2


def say(msg):
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


def usage_error(msg):
    print(f"{PROG}: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(EXIT_USAGE)


def read_hostfile(path):
    """[(host, slots)] in file order; a host named twice gets the sum of its slots, a line
    without slots= counts 1 (what Open MPI does with a hostfile line)."""
    hosts, slots = [], {}
    with open(path) as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            n = 1
            for w in words[1:]:
                if w.startswith("slots="):
                    try:
                        n = int(w.split("=", 1)[1])
                    except ValueError:
                        usage_error(f"hostfile '{path}': bad '{w}'")
            if words[0] not in slots:
                hosts.append(words[0])
                slots[words[0]] = 0
            slots[words[0]] += n
    return [(h, slots[h]) for h in hosts]


def option_value(args, name):
    """The last value of `name V` or `name=V` in a ringtrain command line (CLI11 takes the last)."""
    value = None
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith(name + "="):
            value = a.split("=", 1)[1]
    return value


def train_option(args, name):
    """What `ringtrain train` takes for `name`: the command line's value, else its --config
    file's (keys are the long options without the dashes, '-' or '_', at the top or under
    [train], as ringtrain reads them), else None. A file Python's TOML reader cannot take
    (ringtrain also reads INI's 'key: value') is a usage error naming it."""
    value = option_value(args, name)
    config = option_value(args, "--config")
    if value is not None or config is None:
        return value
    import tomllib  # Python 3.11 (Debian 12)
    try:
        with open(config, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        usage_error(f"train's --config {config}: cannot read it ({e.strerror})")
    except tomllib.TOMLDecodeError as e:
        usage_error(f"train's --config {config}: not TOML as --elastic reads it ({e}); give --run-dir, "
                    "--logical-shards and --mode on the command line instead")
    key = name.lstrip("-")
    for table in (data, data.get("train") if isinstance(data.get("train"), dict) else {}):
        for k in (key, key.replace("-", "_")):
            if k in table:
                v = table[k]
                return str(v).lower() if isinstance(v, bool) else str(v)
    return None


def choose_np(capacity, shards, lo, hi):
    """The largest p in [lo, hi] that fits `capacity` slots and divides `shards` (any p when 0)."""
    for p in range(min(hi, capacity), lo - 1, -1):
        if shards == 0 or shards % p == 0:
            return p
    return None


def local_names():
    names = {"localhost", "127.0.0.1", "::1"}
    try:
        full = socket.gethostname()
        names |= {full, full.split(".")[0]}
    except OSError:
        pass
    return names


def agent_argv(agent, timeout):
    """The command to reach a host the way mpirun does: plm_rsh_agent (its first choice when
    it lists several with ':'), else ssh; ssh gets batch mode and a connect timeout."""
    argv = shlex.split(agent.split(":")[0]) if agent.strip() else ["ssh"]
    if os.path.basename(argv[0]) == "ssh":
        argv += ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={max(1, int(timeout))}"]
    return argv


def answering(hosts, agent, timeout):
    """The hosts among `hosts` on which `<agent> HOST true` succeeds within `timeout` seconds
    (asked in parallel). This host itself needs no agent (mpirun starts its ranks directly)."""
    local = local_names()
    procs = {}
    for h in hosts:
        if h in local:
            continue
        try:
            procs[h] = subprocess.Popen(agent_argv(agent, timeout) + [h, "true"], stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
        except OSError as e:
            say(f"cannot run the agent for {h}: {e}")
    deadline = time.monotonic() + timeout
    ok = {h for h in hosts if h in local}
    for h, p in procs.items():
        try:
            if p.wait(timeout=max(0.0, deadline - time.monotonic())) == 0:
                ok.add(h)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    return [h for h in hosts if h in ok]
