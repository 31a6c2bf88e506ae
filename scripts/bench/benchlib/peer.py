"""The PyTorch peer: Debian's python3-torch (1.13, CPU) running benchlib/torch_peer.py under Debian's
interpreter. Not in scripts/setup.sh (benchmarks only, never tests): a suite says how to install it,
or with --install-peer installs it (apt-get, as root or through sudo) before measuring."""
import os
import shutil
import subprocess
import sys

from .proc import log

PYTHON = os.environ.get("RINGTRAIN_BENCH_PYTHON", "/usr/bin/python3")
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_peer.py")
PACKAGES = {"torch": ["python3-torch", "libopenblas0-openmp"], "torchvision": ["python3-torchvision"]}


def add_options(p):
    p.add_argument("--install-peer", action="store_true",
                   help="apt-get install the PyTorch peer's Debian packages if they are missing")
    p.add_argument("--no-peer", action="store_true", help="measure ringtrain alone")


def importable(module):
    return subprocess.run([PYTHON, "-c", f"import {module}"], capture_output=True).returncode == 0


def ready(args, modules=("torch",)):
    """True if PYTHON imports every module (after installing them with --install-peer)."""
    if getattr(args, "no_peer", False):
        return False
    missing = [m for m in modules if not importable(m)]
    packages = [p for m in missing for p in PACKAGES.get(m, [f"python3-{m}"])]
    if missing and getattr(args, "install_peer", False):
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        if sudo and not shutil.which("sudo"):
            log("--install-peer needs root or sudo")
        else:
            log(f"installing {' '.join(packages)} ...")
            subprocess.run(sudo + ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
                           stdout=sys.stderr)  # stdout is the report's
            missing = [m for m in missing if not importable(m)]
    if missing:
        log(f"the PyTorch peer is not installed ({PYTHON} lacks {', '.join(missing)}): ringtrain's figures "
            f"alone. Install: apt-get install {' '.join(packages)} (or pass --install-peer)")
    return not missing
