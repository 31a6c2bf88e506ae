# Sourced by the bash script tests: a temporary directory removed on exit, and a failure
# counter that `fail` raises and `finish NAME [LOG]` turns into the exit status.
set -uo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
finish() {
  if ((fails)); then
    echo "$1: $fails failure(s)"
    [[ -n ${2:-} ]] && cat "$2"
    exit 1
  fi
  echo "$1: all checks passed"
}
