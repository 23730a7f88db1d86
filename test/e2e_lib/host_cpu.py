"""What xfmrc's default (--int8-dot) compiles integer products to on this
host, as lib/Driver/Compiler.cpp chooses: 16 lanes with AVX-512F, then
vpdpbusd ("vnni") where the width has it, else vpmaddubsw ("madd")."""


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            return set(f.read().split())
    except OSError:
        return set()


def integer_dot(flags=None):
    """"vnni", "madd" or None."""
    flags = cpu_flags() if flags is None else flags
    if "avx512f" in flags:
        return "vnni" if "avx512_vnni" in flags else "madd" if "avx512bw" in flags else None
    if "avx_vnni" in flags or {"avx512_vnni", "avx512vl"} <= flags:
        return "vnni"
    return "madd" if "avx2" in flags else None
