"""Writes a LoRA adapter made for another model: the fixture for "an adapter
of another base model is rejected". It is the tiny model's own adapter GGUF
(same metadata: a qwen2vl LoRA) with every dimension that is the tiny text
model's hidden size (128) made 96 and seeded random f32 values, i.e. the
adapter of a 96-wide Qwen2.5-VL. llama.cpp accepts its header and refuses
its tensor shapes.

Usage: python mismatch_lora.py IN_LORA.gguf OUT.gguf (byte-reproducible).
"""

import sys

import gguf
import numpy as np
from gguf_copy import copy_metadata, write

HIDDEN = 128
WIDTH = 96


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    reader, writer = copy_metadata(src, dst)
    rng = np.random.default_rng(7)
    changed = 0
    for t in reader.tensors:
        assert t.tensor_type == gguf.GGMLQuantizationType.F32, t.name
        shape = tuple(WIDTH if d == HIDDEN else d for d in t.data.shape)
        changed += shape != t.data.shape
        data = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        writer.add_tensor(t.name, data, raw_dtype=t.tensor_type)
    assert changed, "no tensor of the adapter has the hidden size"
    write(writer)


if __name__ == "__main__":
    main()
