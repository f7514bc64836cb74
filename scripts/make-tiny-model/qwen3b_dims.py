"""Writes a random model with Qwen2.5-VL-3B-Instruct's real dimensions, for
timing and memory measurements whose answers do not matter: the text model
(36 layers, hidden 2048, FFN 11008, 16 query and 2 KV heads, tied
embeddings, 151,936-entry vocabulary) as q4_0, what a phone runs, and the
vision tower (32 blocks, width 1280, FFN 3420, 16 heads, full attention in
blocks 7, 15, 23 and 31, merger to 2048) as f16, as llama.cpp's converter
writes it.

The fixture's GGUFs are the templates: their metadata (tokenizer, chat
template, projector type) is copied with the dimensions replaced, and the
vocabulary widened as wide_vocab.py does. Weights are seeded noise with
about Qwen's initial scale; q4_0 blocks get a fixed scale and random
nibbles, so nothing is quantized in Python.

Usage: python qwen3b_dims.py TEXT.gguf MMPROJ.gguf OUT_DIR
(writes OUT_DIR/qwen25vl-3b-dims-q4_0.gguf and OUT_DIR/mmproj-qwen25vl-3b-dims-f16.gguf).
"""

import os
import sys

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader
from gguf_copy import copy_metadata, write
from wide_vocab import QWEN_VOCAB, new_pieces

SEED = 3
STD = 0.02

HIDDEN, FFN, LAYERS, HEADS, KV_HEADS = 2048, 11008, 36, 16, 2
KV = KV_HEADS * HIDDEN // HEADS
V_HIDDEN, V_FFN, V_LAYERS, V_HEADS = 1280, 3420, 32, 16
# Qwen2.5-VL-3B's fullatt_block_indexes [7, 15, 23, 31]: every 8th block.
V_FULL_ATTENTION_EVERY = 8
MERGED = V_HIDDEN * 4  # a 2x2 patch merge

# ggml order (ne0 first) per tensor name after the block number.
TEXT_SHAPES = {
    "token_embd.weight": (HIDDEN, QWEN_VOCAB),
    "output_norm.weight": (HIDDEN,),
    "attn_norm.weight": (HIDDEN,),
    "ffn_norm.weight": (HIDDEN,),
    "attn_q.weight": (HIDDEN, HIDDEN),
    "attn_q.bias": (HIDDEN,),
    "attn_k.weight": (HIDDEN, KV),
    "attn_k.bias": (KV,),
    "attn_v.weight": (HIDDEN, KV),
    "attn_v.bias": (KV,),
    "attn_output.weight": (HIDDEN, HIDDEN),
    "ffn_gate.weight": (HIDDEN, FFN),
    "ffn_up.weight": (HIDDEN, FFN),
    "ffn_down.weight": (FFN, HIDDEN),
}
VISION_SHAPES = {
    "v.patch_embd.weight": (14, 14, 3, V_HIDDEN),
    "v.patch_embd.weight.1": (14, 14, 3, V_HIDDEN),
    "v.post_ln.weight": (V_HIDDEN,),
    "mm.0.weight": (MERGED, MERGED),
    "mm.0.bias": (MERGED,),
    "mm.2.weight": (MERGED, HIDDEN),
    "mm.2.bias": (HIDDEN,),
    "ln1.weight": (V_HIDDEN,),
    "ln2.weight": (V_HIDDEN,),
    **{f"attn_{p}.weight": (V_HIDDEN, V_HIDDEN) for p in ("q", "k", "v", "out")},
    **{f"attn_{p}.bias": (V_HIDDEN,) for p in ("q", "k", "v", "out")},
    "ffn_gate.weight": (V_HIDDEN, V_FFN),
    "ffn_up.weight": (V_HIDDEN, V_FFN),
    "ffn_down.weight": (V_FFN, V_HIDDEN),
    "ffn_gate.bias": (V_FFN,),
    "ffn_up.bias": (V_FFN,),
    "ffn_down.bias": (V_HIDDEN,),
}

Q4_0_BLOCK, Q4_0_BYTES = 32, 18


def names(template: GGUFReader, layers: int, blk: str) -> list[str]:
    """The template's tensor names with its block-0 names repeated for
    `layers` blocks (`blk` is the block prefix, "blk." or "v.blk.")."""
    out = []
    for t in template.tensors:
        if t.name.startswith(blk + "0."):
            rest = t.name[len(blk) + 2:]
            out += [f"{blk}{i}.{rest}" for i in range(layers)]
        elif not t.name.startswith(blk):
            out.append(t.name)
    return out


def shape_of(name: str, shapes: dict, blk: str) -> tuple:
    key = name[len(blk):].split(".", 1)[1] if name.startswith(blk) else name
    return shapes[key]


def vector(name: str, shape: tuple) -> np.ndarray:
    """A norm's weights (ones) or a bias (zeros), as a fresh model has them."""
    is_norm = "norm" in name or "ln" in name
    return (np.ones if is_norm else np.zeros)(shape, np.float32)


def noise(rng: np.random.Generator, shape: tuple, dtype) -> np.ndarray:
    # numpy order is ggml's reversed.
    return (rng.standard_normal(shape[::-1], dtype=np.float32) * STD).astype(dtype)


def q4_0(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Random q4_0 blocks: values (nibble - 8) * d, d fixed for a spread of
    about STD."""
    ne0, rows = shape[0], int(np.prod(shape[1:]))
    blocks = np.empty((rows, ne0 // Q4_0_BLOCK, Q4_0_BYTES), dtype=np.uint8)
    blocks[..., :2] = np.frombuffer(np.float16(STD / 4.6).tobytes(), dtype=np.uint8)
    blocks[..., 2:] = rng.integers(0, 256, size=blocks[..., 2:].shape, dtype=np.uint8)
    return blocks.reshape(rows, -1)


def text_model(src: str, dst: str, rng: np.random.Generator) -> None:
    template = GGUFReader(src)
    tokens = template.fields["tokenizer.ggml.tokens"].contents()
    types = template.fields["tokenizer.ggml.token_type"].contents()
    added = QWEN_VOCAB - len(tokens)
    _, writer = copy_metadata(src, dst, {
        "general.name": "qwen25vl-3b-dims",
        "general.size_label": "3B",
        "general.file_type": int(GGMLQuantizationType.Q4_0),
        "qwen2vl.block_count": LAYERS,
        "qwen2vl.context_length": 128000,
        "qwen2vl.embedding_length": HIDDEN,
        "qwen2vl.feed_forward_length": FFN,
        "qwen2vl.attention.head_count": HEADS,
        "qwen2vl.attention.head_count_kv": KV_HEADS,
        "qwen2vl.rope.dimension_sections": [16, 24, 24, 0],
        "tokenizer.ggml.tokens": tokens + new_pieces(tokens, added),
        "tokenizer.ggml.token_type": types + [1] * added,
    })
    for name in names(template, LAYERS, "blk."):
        if name == "output.weight":
            continue  # tied to token_embd, as in Qwen2.5-VL-3B
        shape = shape_of(name, TEXT_SHAPES, "blk.")
        if len(shape) == 1:
            writer.add_tensor(name, vector(name, shape))
        else:
            writer.add_tensor(name, q4_0(rng, shape), raw_dtype=GGMLQuantizationType.Q4_0)
    write(writer)


def projector(src: str, dst: str, rng: np.random.Generator) -> None:
    template = GGUFReader(src)
    _, writer = copy_metadata(src, dst, {
        "general.name": "qwen25vl-3b-dims",
        "general.size_label": "669M",
        "clip.vision.projection_dim": HIDDEN,
        "clip.vision.embedding_length": V_HIDDEN,
        "clip.vision.feed_forward_length": V_FFN,
        "clip.vision.block_count": V_LAYERS,
        "clip.vision.attention.head_count": V_HEADS,
        "clip.vision.n_wa_pattern": V_FULL_ATTENTION_EVERY,
    })
    for name in names(template, V_LAYERS, "v.blk."):
        shape = shape_of(name, VISION_SHAPES, "v.blk.")
        if len(shape) == 1:
            writer.add_tensor(name, vector(name, shape))
        else:
            writer.add_tensor(name, noise(rng, shape, np.float16))
    write(writer)


def main() -> None:
    text, mmproj, out = sys.argv[1:4]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(SEED)
    text_model(text, os.path.join(out, "qwen25vl-3b-dims-q4_0.gguf"), rng)
    projector(mmproj, os.path.join(out, "mmproj-qwen25vl-3b-dims-f16.gguf"), rng)


if __name__ == "__main__":
    main()
