"""Writes a projector whose output width (96) differs from the tiny text
model's embedding width (128): the fixture for "a mismatched mmproj is
rejected". It is the tiny model's own mmproj with the last merger layer
(mm.2) replaced by a seeded random 256 -> 96 layer and projection_dim set to
match, so everything but the width is a valid Qwen2.5-VL projector.

Usage: python mismatch_mmproj.py IN_MMPROJ.gguf OUT.gguf (byte-reproducible).
"""

import sys

import numpy as np
from gguf_copy import copy_metadata, write

WIDTH = 96


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    reader, writer = copy_metadata(src, dst, {"clip.vision.projection_dim": WIDTH})
    rng = np.random.default_rng(7)
    for t in reader.tensors:
        data = np.array(t.data)
        if t.name == "mm.2.weight":
            data = (rng.standard_normal((WIDTH, data.shape[1])) * 0.02).astype(np.float16)
        elif t.name == "mm.2.bias":
            data = np.zeros(WIDTH, dtype=np.float32)
        writer.add_tensor(t.name, data, raw_dtype=t.tensor_type)
    write(writer)


if __name__ == "__main__":
    main()
