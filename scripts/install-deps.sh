#!/usr/bin/env bash
# Installs what building and testing xfmr needs on Debian 12, from apt only:
# LLVM/MLIR 22 (Debian's bookworm-security backport), clang, OpenMP, CMake,
# Ninja, compiler-rt (sanitizers, libFuzzer), libsentencepiece (SentencePiece
# tokenizers), PCRE2 and utf8proc (tokenizer.json's regular expressions and
# Unicode normalization), Open MPI (data-parallel training), cpp-httplib and
# nlohmann-json (the server of --serve), Debian's PyTorch + NumPy
# (the per-op test oracle), python3-venv (for the transformers oracle,
# scripts/install-oracle.sh) and matplotlib (the attention-maps example).
# Installs nothing that is already there.
set -euo pipefail

packages=(
  cmake ninja-build g++ clang-22 lld-22
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools libomp-22-dev libclang-rt-22-dev
  libsentencepiece-dev libpcre2-dev libutf8proc-dev libopenmpi-dev openmpi-bin
  libcpp-httplib-dev nlohmann-json3-dev
  python3-torch python3-numpy python3-venv python3-matplotlib time
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
echo "xfmr: installing ${missing[*]}" >&2
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
