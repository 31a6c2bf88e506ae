#!/usr/bin/env bash
# sweep.sh: the grid of ringtrain runs, now scripts/mpirun/sweep.py (same options and output;
# see `sweep.sh --help`). Kept so existing commands and docs keep working.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Debian's interpreter: the python3 on PATH may be a pyenv one without Debian's packages
# (the report needs matplotlib).
RINGTRAIN_SWEEP_PROG=sweep.sh exec /usr/bin/python3 "$here/sweep.py" "$@"
