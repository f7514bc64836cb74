"""Writes a projector whose output width (96) differs from the tiny text
model's embedding width (128): the fixture for "a mismatched mmproj is
rejected". It is the tiny model's own mmproj with the last merger layer
(mm.2) replaced by a seeded random 256 -> 96 layer and projection_dim set to
match, so everything but the width is a valid Qwen2.5-VL projector.

Usage: python mismatch_mmproj.py IN_MMPROJ.gguf OUT.gguf (byte-reproducible).
"""

import sys

import gguf
import numpy as np

WIDTH = 96


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(dst, arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        value = field.contents()
        if name == "clip.vision.projection_dim":
            value = WIDTH
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, value, vtype, sub_type=sub)
    rng = np.random.default_rng(7)
    for t in reader.tensors:
        data = np.array(t.data)
        if t.name == "mm.2.weight":
            data = (rng.standard_normal((WIDTH, data.shape[1])) * 0.02).astype(np.float16)
        elif t.name == "mm.2.bias":
            data = np.zeros(WIDTH, dtype=np.float32)
        writer.add_tensor(t.name, data, raw_dtype=t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
