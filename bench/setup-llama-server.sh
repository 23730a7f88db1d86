#!/usr/bin/env bash
# Builds llama.cpp's llama-server from the llama.cpp sources in the
# llama-cpp-python distribution that bench/setup-peers.sh installs (the same
# llama.cpp the generation benchmark runs), into build/llama-server/cmake/bin,
# for the serving benchmark (bench/serve.py). Nothing happens when it is built.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${XFMR_BUILD_DIR:-$root/build}"
venv="$build/bench-venv"
out="$build/llama-server"
if [ -x "$out/cmake/bin/llama-server" ]; then
  exit 0
fi
"$root/bench/setup-peers.sh"
version="$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))')"
mkdir -p "$out"
cd "$out"
echo "xfmr: building llama-server of llama-cpp-python $version into $out" >&2
"$venv/bin/pip" download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
  "llama-cpp-python==$version" -d src
tar -xzf src/llama_cpp_python-"$version".tar.gz -C src
cmake -S "src/llama_cpp_python-$version/vendor/llama.cpp" -B cmake -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DGGML_NATIVE=ON > cmake.log
ninja -C cmake -j "${XFMR_JOBS:-2}" llama-server > build.log
