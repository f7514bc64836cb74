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

HIDDEN = 128
WIDTH = 96


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(dst, arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), vtype, sub_type=sub)
    rng = np.random.default_rng(7)
    changed = 0
    for t in reader.tensors:
        assert t.tensor_type == gguf.GGMLQuantizationType.F32, t.name
        shape = tuple(WIDTH if d == HIDDEN else d for d in t.data.shape)
        changed += shape != t.data.shape
        data = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        writer.add_tensor(t.name, data, raw_dtype=t.tensor_type)
    assert changed, "no tensor of the adapter has the hidden size"
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
