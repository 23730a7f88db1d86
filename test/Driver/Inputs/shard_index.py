"""Prints a model.safetensors.index.json mapping every tensor of a safetensors
file (plus --extra names) to the shard name given."""
import json
import struct
import sys

path, shard = sys.argv[1], sys.argv[2]
extra = [a.split("=", 1)[1] for a in sys.argv[3:] if a.startswith("--extra=")]
with open(path, "rb") as f:
    (size,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(size))
names = [n for n in header if n != "__metadata__"] + extra
print(json.dumps({"metadata": {}, "weight_map": {n: shard for n in names}}))
