"""Kernel times of a command by Nsight Compute (ncu, the binary in $NCU):
[(kernel name, ms)] in launch order."""
import csv
import io
import os
import subprocess

SCALE = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3, "ns": 1e-6, "us": 1e-3,
         "ms": 1.0, "s": 1e3}


def ncu_kernels(cmd, timeout=300):
    out = subprocess.run([os.environ["NCU"], "--csv", "--metrics", "gpu__time_duration.sum"] + cmd,
                         capture_output=True, text=True, timeout=timeout)
    rows = [r for r in csv.reader(io.StringIO(out.stdout)) if len(r) > 10]
    head, body = rows[0], rows[1:]
    ki, ui, vi = head.index("Kernel Name"), head.index("Metric Unit"), head.index("Metric Value")
    return [(r[ki], float(r[vi].replace(",", "")) * SCALE[r[ui]]) for r in body]
