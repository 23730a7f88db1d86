#!/usr/bin/env bash
# Fetches NVIDIA's SASS disassembler, nvdisasm, into build/tools/ where the
# CUDA toolkit has ptxas but no nvdisasm (the CI machine's has none): the
# pinned nvidia-cuda-nvdisasm wheel from PyPI, its SHA-256 checked. With it
# the tests read the SASS ptxas makes of the sm_90a kernels
# (test/Driver/sass-fragments.test); without it (PyPI unreachable) lit
# reports those checks UNSUPPORTED and says why.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${XFMR_BUILD_DIR:-$root/build}"
cuda="${XFMR_CUDA_ROOT:-/usr/local/cuda}"
version=13.5.37
if [ ! -x "$cuda/bin/ptxas" ] || [ -x "$cuda/bin/nvdisasm" ] || [ -x "$build/tools/nvdisasm" ]; then
  exit 0
fi
mkdir -p "$build/tools"
if ! /usr/bin/python3 - "$version" "$build/tools/nvdisasm" <<'PY'
import hashlib, io, json, os, sys, urllib.parse, urllib.request, zipfile

version, target = sys.argv[1:]
index = "https://pypi.org/pypi/nvidia-cuda-nvdisasm/json"
with urllib.request.urlopen(index, timeout=60) as r:
    index, files = r.geturl(), json.load(r)["releases"][version]
wheel = next(u for u in files if u["filename"].endswith("manylinux_2_17_x86_64.whl"))
# Mirrors of PyPI may give the wheel's address relative to the index's.
with urllib.request.urlopen(urllib.parse.urljoin(index, wheel["url"]), timeout=300) as r:
    data = r.read()
if hashlib.sha256(data).hexdigest() != wheel["digests"]["sha256"]:
    sys.exit(f"{wheel['filename']}: SHA-256 mismatch")
with zipfile.ZipFile(io.BytesIO(data)) as archive:
    member = next(n for n in archive.namelist() if n.endswith("/bin/nvdisasm"))
    with open(target + ".part", "wb") as f:
        f.write(archive.read(member))
os.chmod(target + ".part", 0o755)
os.replace(target + ".part", target)
PY
then
  echo "xfmr: could not fetch nvdisasm $version from PyPI: SASS checks will be UNSUPPORTED" >&2
fi
