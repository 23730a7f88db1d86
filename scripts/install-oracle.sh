#!/usr/bin/env bash
# Installs the whole-model test oracle -- Hugging Face transformers, the
# PyTorch 2.x it runs on and sentence-transformers, pinned in
# scripts/oracle-requirements.txt -- from PyPI into a virtual environment
# under the build tree. Nothing happens when the environment already holds
# exactly these requirements.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${XFMR_BUILD_DIR:-$root/build}"
venv="$build/oracle-venv"
requirements="$root/scripts/oracle-requirements.txt"
stamp="$venv/.requirements"

if [ -f "$stamp" ] && cmp -s "$stamp" "$requirements"; then
  exit 0
fi
echo "xfmr: installing the transformers oracle into $venv" >&2
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
"$venv/bin/python" -c "import torch, transformers, sentence_transformers"
cp "$requirements" "$stamp"
