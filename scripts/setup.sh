#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine: installs the Debian packages ringtrain
# needs, and only those that are missing, so a second run is fast and silent.
set -euo pipefail

# ocl-icd-opencl-dev is only a Recommends of libdnnl-dev, but Debian's dnnl CMake config
# requires OpenCL, and we install without recommends.
packages=(
  build-essential cmake pkg-config git
  libopenmpi-dev openmpi-bin
  libdnnl-dev ocl-icd-opencl-dev libcli11-dev catch2 zlib1g-dev libfmt-dev
  # The CRC32 of checkpoints and snapshots (zlib's values, about twice as fast).
  libdeflate-dev
  # ringtrain export: ONNX's protobuf classes and the protobuf library they use.
  libonnx-dev libprotobuf-dev
  # Image folders: JPEG (libjpeg-turbo's libjpeg API) and PNG decoding.
  libjpeg62-turbo-dev libspng-dev
  dataset-fashion-mnist
  python3 python3-matplotlib procps
  # Tests only: decoding TensorBoard event files with the real protobuf library and
  # checking their CRC-32C with an independent implementation.
  python3-protobuf protobuf-compiler python3-crc32c
  # Tests only: the exported ONNX files checked by onnx's checker, run by numpy.
  python3-onnx python3-numpy
)

# --fuzz: also clang and its runtime libraries (libFuzzer, sanitizers) for scripts/fuzz.sh.
# GCC's own sanitizer runtimes (scripts/test.sh --sanitize) come with build-essential.
if [[ ${1:-} == --fuzz ]]; then
  packages+=(clang-14 libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
  else
    echo "setup.sh: missing Debian packages: ${missing[*]}" >&2
    echo "setup.sh: run as root, or: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
else
  SUDO=()
fi

echo "setup.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
