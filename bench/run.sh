#!/usr/bin/env bash
# The CPU benchmark table (not a test): builds xfmr, makes sure PyTorch can
# use Debian's OpenMP OpenBLAS (libopenblas0-openmp; the default pthread
# OpenBLAS fights PyTorch's own threads for the cores), and runs bench.py.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
if ! dpkg-query -W -f='${Status}' libopenblas0-openmp 2>/dev/null | grep -q "install ok installed"; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get install -y -q --no-install-recommends libopenblas0-openmp
fi
"$root/scripts/build.sh"
exec /usr/bin/python3 "$root/bench/bench.py" --build "${XFMR_BUILD_DIR:-$root/build}" "$@"
