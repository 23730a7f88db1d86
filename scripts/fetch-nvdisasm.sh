#!/usr/bin/env bash
# Fetches NVIDIA's SASS disassembler, nvdisasm, into build/tools/ where the
# CUDA toolkit has ptxas but no nvdisasm (the CI machine's has none): pip
# downloads the pinned nvidia-cuda-nvdisasm wheel from the package index it
# is configured with, and accepts it only with the SHA-256 below. With it
# the tests read the SASS ptxas makes of the sm_90a kernels
# (test/Driver/sass-fragments.test); without it (no index reachable) lit
# reports those checks UNSUPPORTED and says why.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${XFMR_BUILD_DIR:-$root/build}"
cuda="${XFMR_CUDA_ROOT:-/usr/local/cuda}"
requirement="nvidia-cuda-nvdisasm==13.5.37 \
--hash=sha256:d3fdbdd49fa53e2e4aacd3db8259d052bd2b049ececdcb69e92e083c6728e7ca"
if [ ! -x "$cuda/bin/ptxas" ] || [ -x "$cuda/bin/nvdisasm" ] || [ -x "$build/tools/nvdisasm" ]; then
  exit 0
fi
mkdir -p "$build/tools"
download="$(mktemp -d)"
trap 'rm -rf "$download"' EXIT
echo "$requirement" >"$download/requirements.txt"
# Debian's python3 has no pip; the oracle's venv (scripts/install-oracle.sh) does.
python="$build/oracle-venv/bin/python"
[ -x "$python" ] || python=python3
if "$python" -m pip download --quiet --no-deps --only-binary=:all: --require-hashes \
    --platform manylinux_2_17_x86_64 --python-version 3.11 \
    -r "$download/requirements.txt" -d "$download" &&
  "$python" - "$download" "$build/tools/nvdisasm" <<'PY'
import glob, os, sys, zipfile

download, target = sys.argv[1:]
with zipfile.ZipFile(glob.glob(os.path.join(download, "*.whl"))[0]) as archive:
    member = next(n for n in archive.namelist() if n.endswith("/bin/nvdisasm"))
    with open(target + ".part", "wb") as f:
        f.write(archive.read(member))
os.chmod(target + ".part", 0o755)
os.replace(target + ".part", target)
PY
then
  :
else
  echo "xfmr: could not fetch nvdisasm from the package index: SASS checks will be UNSUPPORTED" >&2
fi
