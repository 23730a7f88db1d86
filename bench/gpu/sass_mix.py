#!/usr/bin/env python3
"""Static instruction mix of each GPU kernel's hot loop, for kernel work on a
machine without a GPU: assembles PTX for its target (sm_90, sm_90a, ...)
with ptxas -v (registers,
spills), disassembles it with nvdisasm and, per kernel, counts by opcode the
instructions of the loop (backward branch) whose body holds the most HGMMA
(warpgroup MMA) or HMMA - or, in kernels without tensor-core products, the
most FFMA (of each such loop
where there are several). The figures of the closing notes ("hot loop 785 ->
647 instructions") come from here.

  xfmrc model.mlir --target=nvptx --emit=ptx -o model.ptx
  sass_mix.py model.ptx ...      (or nvdisasm -c listings: kernel.sass)

It also fails (exit 1, an ERROR line) where a loop's warpgroup MMA reads A
fragments from registers the loop writes only after it (carried_fragments).

ptxas: $PTXAS or /usr/local/cuda/bin/ptxas; nvdisasm: $NVDISASM, else on the
PATH or next to ptxas (without the CUDA toolkit's, `pip install
nvidia-cuda-nvdisasm` has one).
"""
import collections
import os
import re
import shutil
import subprocess
import sys

PTXAS = os.environ.get("PTXAS", "/usr/local/cuda/bin/ptxas")
NVDISASM = (os.environ.get("NVDISASM") or shutil.which("nvdisasm")
            or os.path.join(os.path.dirname(PTXAS), "nvdisasm"))


def registers(log):
    """{kernel: (registers, spill store bytes)} from ptxas -v."""
    result, kernel, spill = {}, None, 0
    for line in log.splitlines():
        if m := re.search(r"Compiling entry function '(\w+)'", line):
            kernel = m.group(1)
        elif m := re.search(r"(\d+) bytes spill stores", line):
            spill = int(m.group(1))
        elif (m := re.search(r"Used (\d+) registers", line)) and kernel:
            result[kernel] = (int(m.group(1)), spill)
    return result


def loops_of(lines):
    """The (opcode, text) instructions of each loop (body up to a backward
    branch) of a kernel's SASS lines."""
    instructions, labels = [], {}
    for line in lines:
        if m := re.match(r"\s*(\.L_x_\d+):", line):
            labels[m.group(1)] = len(instructions)
        elif m := re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?);", line):
            text = re.sub(r"^@!?U?P\w+\s+", "", m.group(1).strip())
            instructions.append((text.split()[0].split(".")[0], text))
    loops = []
    for i, (opcode, text) in enumerate(instructions):
        target = re.search(r"(\.L_x_\d+)", text) if opcode == "BRA" else None
        if target and labels.get(target.group(1), i) < i:
            loops.append(instructions[labels[target.group(1)]:i + 1])
    return loops


def hot_loops(loops):
    """(the useful opcode, the loops whose body holds the most of it):
    HGMMA (warpgroup MMA), else HMMA, else FFMA; several where a kernel
    builds its loop once per way of staging its tiles."""
    for useful in ("HGMMA", "HMMA", "FFMA"):
        most = max((count(body, useful) for body in loops), default=0)
        if most:
            return useful, [body for body in loops if count(body, useful) == most]
    return None, []


def count(body, opcode):
    return sum(op == opcode for op, _ in body)


def written(text):
    """The registers an instruction writes, by its first operand: as wide as
    its .64/.128/.x2/.x4/.WIDE suffix, or an HGMMA's f32 accumulators."""
    opcode, _, operands = text.partition(" ")
    first = re.match(r"R(\d+)\b", operands.strip())
    if not first or re.match(r"(ST|RED|BRA|BAR|CALL|RET|EXIT)", opcode):
        return set()
    width = 1
    if m := re.match(r"HGMMA\.64x(\d+)x", opcode):
        width = int(m.group(1)) // 2
    elif m := re.search(r"\.(64|128|x2|x4|WIDE)\b", opcode):
        width = {"64": 2, "128": 4, "x2": 2, "x4": 4, "WIDE": 2}[m.group(1)]
    return set(range(int(first.group(1)), int(first.group(1)) + width))


def carried_fragments(body):
    """HGMMAs of a loop whose A fragments (4 registers) the loop writes only
    after them: at every iteration but the first they read what the last one
    left there. None of our kernels means that - ptxas has given a loop-
    invariant fragment (Q) the registers of one written in the loop (P).
    Also HGMMAs whose A fragments are written while they may still read
    them: before the next wait (WARPGROUP.DEPBAR), past the back edge too."""
    problems = []
    for i, (opcode, text) in enumerate(body):
        a = re.match(r"HGMMA\S* R\d+, R(\d+),", text)
        if not a:
            continue
        fragment = set(range(int(a.group(1)), int(a.group(1)) + 4))
        before = any(written(t) & fragment for _, t in body[:i])
        after = [t for _, t in body[i + 1:] if written(t) & fragment]
        if after and not before:
            problems.append(f"{text} reads what '{after[-1]}' wrote an iteration earlier")
        for _, t in body[i + 1:] + body[:i]:
            if t.startswith("WARPGROUP.DEPBAR"):
                break
            if written(t) & fragment and not t.startswith("HGMMA"):
                problems.append(f"'{t}' overwrites the A fragment of {text} in flight")
                break
    return problems


def under_mma(body):
    """How many of a loop's MUFU (the softmax's exponentials) issue while a
    group of warpgroup MMAs is in flight (after an HGMMA that ends a group,
    gsb0, before the WARPGROUP.DEPBAR that waits for it): what the tensor
    cores overlap. ptxas waits for every group where branches join, and
    before it writes a register an MMA in flight reads (where its register
    allocation reuses one), so either undoes a software pipeline."""
    in_flight = overlapped = 0
    for opcode, text in body:
        if opcode == "HGMMA" and "gsb0" in text:
            in_flight += 1
        elif m := re.match(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x(\d+)", text):
            in_flight = min(in_flight, int(m.group(1)))
        elif opcode == "MUFU" and in_flight:
            overlapped += 1
    return overlapped


def disassemble(path):
    """({kernel: (registers, spill bytes)}, the SASS listing) of a PTX file,
    or (nothing, the listing) of an nvdisasm -c listing (.sass)."""
    with open(path) as f:
        text = f.read()
    if path.endswith(".sass"):
        return {}, text
    arch = re.search(r"^\.target\s+(sm_\w+)", text, re.M).group(1)
    cubin = os.path.splitext(path)[0] + f".{arch}.cubin"
    log = subprocess.run([PTXAS, "-v", f"-arch={arch}", path, "-o", cubin], check=True,
                         capture_output=True, text=True).stderr
    return registers(log), subprocess.run([NVDISASM, "-c", cubin], check=True,
                                          capture_output=True, text=True).stdout


def main():
    failed = False
    for ptx in sys.argv[1:]:
        used, sass = disassemble(ptx)
        kernels, name = collections.OrderedDict(), None
        for line in sass.splitlines():
            if m := re.match(r"\s*\.text\.(\w+):", line):
                name = m.group(1)
                kernels[name] = []
            elif name:
                kernels[name].append(line)
        for name, lines in kernels.items():
            regs, spill = used.get(name, (None, None))
            loops = loops_of(lines)
            for loop in loops:
                for problem in carried_fragments(loop):
                    print(f"{os.path.basename(ptx)} {name}: ERROR: {problem}")
                    failed = True
            useful, hottest = hot_loops(loops)
            for loop in hottest:
                counts = collections.Counter(op for op, _ in loop)
                mix = " ".join(f"{op} {n}" for op, n in counts.most_common(12))
                local = counts["LDL"] + counts["STL"]
                print(f"{os.path.basename(ptx)} {name}: {regs or '?'} registers, {spill or 0} bytes "
                      f"spilled; hot loop {len(loop)} instructions "
                      f"({len(loop) / counts[useful]:.1f} per {useful}, {local} local memory, "
                      f"{counts['LDGSTS']} cp.async, {under_mma(loop)} of {counts['MUFU']} MUFU "
                      f"under MMA): {mix}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
