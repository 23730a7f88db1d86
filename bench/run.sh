#!/usr/bin/env bash
# The CPU benchmark table (not a test): builds xfmr, installs the peers
# (bench/setup-peers.sh: PyTorch 2.x, ONNX Runtime; once) and runs bench.py.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
"$root/bench/setup-peers.sh"
exec /usr/bin/python3 "$root/bench/bench.py" --build "${XFMR_BUILD_DIR:-$root/build}" "$@"
