"""Splits a safetensors file into a sharded checkpoint directory as
transformers writes one: model-0000i-of-0000N.safetensors files, tensors in
order, about equal in bytes, and model.safetensors.index.json mapping each
tensor to its shard.

  shard_safetensors.py FILE DIR --shards N [--align BYTES]"""

import argparse
import json
import os

import safetensors_io


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file")
    parser.add_argument("directory")
    parser.add_argument("--shards", type=int, required=True)
    parser.add_argument("--align", type=int, default=8,
                        help="each tensor's alignment in its shard (64: on cache lines)")
    args = parser.parse_args()
    tensors = safetensors_io.read(args.file)
    total = sum(array.nbytes for array in tensors.values())
    shards, written = [{} for _ in range(args.shards)], 0
    for name, array in tensors.items():
        shards[min(written * args.shards // total, args.shards - 1)][name] = array
        written += array.nbytes
    os.makedirs(args.directory, exist_ok=True)
    weight_map = {}
    for index, shard in enumerate(shards, 1):
        file = f"model-{index:05d}-of-{args.shards:05d}.safetensors"
        safetensors_io.write(os.path.join(args.directory, file), shard, align=args.align)
        weight_map.update({name: file for name in shard})
    with open(os.path.join(args.directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)


if __name__ == "__main__":
    main()
