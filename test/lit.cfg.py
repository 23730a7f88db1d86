# -*- Python -*-
import os
import shutil
import sys

import lit.formats
from lit.llvm import llvm_config

config.name = "xfmr"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs", "e2e_lib"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.xfmr_obj_root, "test")

llvm_config.with_system_environment(["HOME", "TMPDIR", "OMP_NUM_THREADS"])
llvm_config.use_default_substitutions()

tool_dirs = [config.xfmr_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["xfmr-opt", "xfmrc"], tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.xfmr_tools_dir, append_path=True)

# PyTorch is the numeric oracle; Debian's python3-torch lives with /usr/bin/python3,
# which a pyenv python3 earlier on PATH would not see.
config.substitutions.append(("%python", "/usr/bin/python3"))
config.substitutions.append(("%testlib", os.path.join(config.test_source_root, "e2e_lib")))
# Building a C program against a compiled model and the runtime library.
config.substitutions.append(("%cc", config.c_compiler))
config.substitutions.append(("%xfmr_include", os.path.join(config.xfmr_src_root, "include")))
config.substitutions.append(("%xfmr_examples", os.path.join(config.xfmr_src_root, "examples")))
config.substitutions.append(("%xfmr_sentencepiece_libs",
    "%s/lib/libxfmr_sentencepiece.a -lsentencepiece" % config.xfmr_obj_root))
config.substitutions.append(("%xfmr_runtime_libs",
    "%s/lib/libxfmr_runtime.a -lpcre2-8 -lutf8proc -lstdc++ -lm -L%s -lomp -Wl,-rpath,%s %s"
    % (config.xfmr_obj_root, config.openmp_lib_dir, config.openmp_lib_dir,
       config.sanitizer_flags)))
import subprocess
try:
    subprocess.run(["/usr/bin/python3", "-c", "import torch"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    config.available_features.add("torch")
except Exception:
    lit_config.warning("PyTorch (python3-torch) not importable by /usr/bin/python3: "
                       "numeric end-to-end tests are UNSUPPORTED")

try:
    subprocess.run(["/usr/bin/python3", "-c", "import matplotlib"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    config.available_features.add("matplotlib")
except Exception:
    lit_config.warning("python3-matplotlib missing: the attention-maps example is UNSUPPORTED")

# The host's vector instructions, and what xfmrc's default (--int8-dot)
# compiles integer products to on it: integer-dot where it takes integer dot
# products (vpdpbusd, or vpmaddubsw).
sys.path.insert(0, os.path.join(config.test_source_root, "e2e_lib"))
import host_cpu  # noqa: E402

flags = host_cpu.cpu_flags()
for flag, feature in (("avx2", "avx2"), ("avx512bw", "avx512bw"), ("avx512_vnni", "avx512vnni"),
                      ("avx512_bf16", "avx512bf16")):
    if flag in flags:
        config.available_features.add(feature)
if host_cpu.integer_dot(flags):
    config.available_features.add("integer-dot")

# Data-parallel training runs under Open MPI's mpirun (scripts/install-deps.sh
# installs it); more processes than cores, and as root in CI containers.
mpirun = shutil.which("mpirun")
if mpirun:
    config.available_features.add("mpi")
    config.substitutions.append(("%mpirun", mpirun + " --oversubscribe"))
    config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
else:
    lit_config.warning("no mpirun (openmpi-bin): data-parallel training tests are UNSUPPORTED")

# Hugging Face transformers is the oracle of whole models: it lives in the
# virtual environment scripts/install-oracle.sh makes under the build tree.
hf_python = os.path.join(config.xfmr_obj_root, "oracle-venv", "bin", "python")
try:
    subprocess.run([hf_python, "-c", "import transformers, sentence_transformers"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    config.available_features.add("transformers")
    config.substitutions.append(("%hfpython", hf_python))
except Exception:
    lit_config.warning("no transformers oracle in %s (scripts/install-oracle.sh installs it): "
                       "whole-model comparisons are UNSUPPORTED" % hf_python)

# llama.cpp itself (llama-cpp-python) is the oracle of GGUF files where the
# benchmarks' peers are installed (bench/setup-peers.sh); opt-in, as building
# it takes minutes.
peers_python = os.path.join(config.xfmr_obj_root, "bench-venv", "bin", "python")
try:
    subprocess.run([peers_python, "-c", "import llama_cpp, transformers, gguf, sentencepiece"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    config.available_features.add("llamacpp")
    config.substitutions.append(("%peerspython", peers_python))
except Exception:
    pass

ptxas = os.path.join(config.cuda_root, "bin", "ptxas")
if os.path.exists(ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
# The SASS checks need ptxas and nvdisasm: the toolkit's, or the one
# scripts/fetch-nvdisasm.sh put in build/tools/.
config.substitutions.append(("%sass_mix", "/usr/bin/python3 " + os.path.join(
    config.xfmr_src_root, "bench", "gpu", "sass_mix.py")))
nvdisasm = next((path for path in (os.path.join(config.cuda_root, "bin", "nvdisasm"),
                                   os.path.join(config.xfmr_obj_root, "tools", "nvdisasm"))
                 if os.path.exists(path)), None)
if os.path.exists(ptxas) and nvdisasm:
    config.available_features.add("nvdisasm")
    config.substitutions.append(("%nvdisasm", nvdisasm))
elif os.path.exists(ptxas):
    lit_config.note("no nvdisasm (scripts/fetch-nvdisasm.sh fetches it): the SASS checks "
                    "of the sm_90a kernels are UNSUPPORTED")
fatbinary = os.path.join(config.cuda_root, "bin", "fatbinary")
if os.path.exists(ptxas) and os.path.exists(fatbinary):
    config.available_features.add("fatbinary")

# GPU executables link libxfmr_cuda, built where cuda.h was found.
if os.path.exists(os.path.join(config.xfmr_obj_root, "lib", "libxfmr_cuda.a")):
    config.available_features.add("cuda-runtime")


def cuda_devices():
    """The CUDA driver and the GPUs it reports (0 without a driver or a GPU)."""
    import ctypes
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None, 0
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return None, 0
    return cuda, count.value


def compute_capability(cuda):
    """(major, minor) of device 0."""
    import ctypes
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR and _MINOR.
    cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, 0)
    cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, 0)
    return major.value, minor.value


cuda, devices = cuda_devices()
if devices > 0:
    config.available_features.add("cuda-device")
    # sm_90a code (warpgroup MMAs) runs on compute capability 9.0 only.
    if compute_capability(cuda) == (9, 0):
        config.available_features.add("cuda-sm90a")
else:
    lit_config.note("no NVIDIA GPU visible to the CUDA driver: GPU execution tests are "
                    "UNSUPPORTED (PTX is still checked with ptxas)")
# MLIR's runner libraries, for tests that execute IR with mlir-runner.
config.substitutions.append(("%mlir_lib_dir", config.openmp_lib_dir))
