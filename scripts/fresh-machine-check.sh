#!/usr/bin/env bash
# Runs .ci/run in a brand-new Debian 12 chroot (debootstrap --variant=minbase), from a clone
# of this repository's HEAD: proves that scripts/setup.sh installs everything the build and
# the tests need, which a CI run on a machine that already has the packages cannot show.
# Needs root, debootstrap and network access to a Debian mirror. The ~6 minutes it took on
# 2 cores predate .ci/run's sanitizer and fuzzing stages, so they are now a lower bound:
# each stage prints its duration and the script its total at the end.
#   scripts/fresh-machine-check.sh [--mirror URL] [--keep]
set -uo pipefail

mirror=http://deb.debian.org/debian
keep=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --mirror) mirror=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "fresh-machine-check.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $(id -u) -eq 0 ]] || { echo "fresh-machine-check.sh: needs root (chroot, mounts)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "fresh-machine-check.sh: apt-get install debootstrap" >&2; exit 2; }

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
root=$(mktemp -d /tmp/ringtrain-fresh.XXXXXX)
cleanup() {
  for m in sys dev/shm dev proc; do mountpoint -q "$root/$m" && umount "$root/$m"; done
  [[ $keep -eq 1 ]] || rm -rf "$root"
}
trap cleanup EXIT

start=$(date +%s)
echo "debootstrap bookworm into $root"
debootstrap --variant=minbase bookworm "$root" "$mirror" > "$root.debootstrap.log" 2>&1 \
  || { echo "debootstrap failed: see $root.debootstrap.log" >&2; exit 1; }
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
mount -t tmpfs tmpfs "$root/dev/shm"
mount -t sysfs sys "$root/sys"
git clone -q "$repo" "$root/work/ringtrain"
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root CI=true \
  bash -c 'cd /work/ringtrain && bash .ci/run'
code=$?
echo "fresh-machine-check: .ci/run exited $code after $(( $(date +%s) - start )) s"
exit $code
